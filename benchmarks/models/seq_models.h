// The LibTorch models of the sequence, tabular and RL benchmarks (toy_lstm,
// vae, wlm/wlmfp16, recom, translator, cart), with their losses, in one
// translation unit so they compile once and are unit-tested for shapes and
// parameter counts. Each follows the published model it names.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "benchmarks/models/parameter_count.h"

namespace mlbench::bench {

// --- toy_lstm: PyTorch's time_sequence_prediction (two stacked LSTMCell(51)).
struct SineSequenceImpl : torch::nn::Module {
  explicit SineSequenceImpl(std::int64_t hidden = 51);
  // input [B, T] -> one prediction per step [B, T]
  torch::Tensor forward(const torch::Tensor& input);
  std::int64_t hidden;
  torch::nn::LSTMCell lstm1{nullptr}, lstm2{nullptr};
  torch::nn::Linear linear{nullptr};
};
TORCH_MODULE(SineSequence);

// The example's data: `waves` sine waves of `length` steps with period 2*pi*T,
// each shifted by a random integer in [-4T, 4T). [waves, length], float64.
torch::Tensor sine_waves(std::int64_t waves, std::int64_t length, double period_t, std::uint64_t seed);

// --- vae: PyTorch's VAE example, 784-400-20.
struct VaeImpl : torch::nn::Module {
  VaeImpl(std::int64_t input = 784, std::int64_t hidden = 400, std::int64_t latent = 20);
  // x [B, input] in [0, 1] -> (reconstruction in (0, 1), mu, logvar)
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc21{nullptr}, fc22{nullptr}, fc3{nullptr}, fc4{nullptr};
};
TORCH_MODULE(Vae);
// Binary cross-entropy (summed) + KL divergence to N(0, I), as in the example.
torch::Tensor vae_loss(const torch::Tensor& recon, const torch::Tensor& x, const torch::Tensor& mu,
                       const torch::Tensor& logvar);

// --- wlm: PyTorch's word_language_model RNNModel (GRU or LSTM, tied weights).
struct RnnLmOptions {
  std::string rnn_type = "GRU";  // GRU or LSTM
  std::int64_t ntoken = 33278;
  std::int64_t ninp = 656;
  std::int64_t nhid = 656;
  std::int64_t nlayers = 2;
  double dropout = 0.2;
  bool tied = true;
};
struct RnnState {
  torch::Tensor h, c;  // c only for LSTM
  RnnState detach() const { return {h.detach(), c.defined() ? c.detach() : c}; }
};
struct RnnLmImpl : torch::nn::Module {
  explicit RnnLmImpl(const RnnLmOptions& options);
  // input [T, B] token ids -> (logits [T, B, ntoken], new state)
  std::pair<torch::Tensor, RnnState> forward(const torch::Tensor& input, const RnnState& state);
  RnnState init_state(std::int64_t batch, const torch::Device& device) const;
  RnnLmOptions options;
  torch::nn::Embedding encoder{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::GRU gru{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::Tensor decoder_weight;  // the embedding's weight when tied
  torch::Tensor decoder_bias;
};
TORCH_MODULE(RnnLm);
// The example's batchify: the token stream cut into `batch` columns [n / batch, batch].
torch::Tensor batchify(const std::vector<std::int32_t>& ids, std::int64_t batch);

// --- recom: NeuMF (He et al. 2017; MLPerf NCF sizes): GMF + MLP towers.
struct NeuMFOptions {
  std::int64_t num_users = 138493;  // ml-20m
  std::int64_t num_items = 26744;
  std::int64_t mf_dim = 64;
  std::vector<std::int64_t> layers = {256, 256, 128, 64};  // layers[0] = 2 x MLP embedding size
};
struct NeuMFImpl : torch::nn::Module {
  explicit NeuMFImpl(const NeuMFOptions& options);
  // user, item [B] ids -> logits [B]
  torch::Tensor forward(const torch::Tensor& user, const torch::Tensor& item);
  NeuMFOptions options;
  torch::nn::Embedding mf_user{nullptr}, mf_item{nullptr}, mlp_user{nullptr}, mlp_item{nullptr};
  torch::nn::ModuleList mlp{nullptr};
  torch::nn::Linear final{nullptr};
};
TORCH_MODULE(NeuMF);

// --- translator: GNMT (Wu et al. 2016; MLPerf's PyTorch GNMT layout).
struct GnmtOptions {
  std::int64_t vocab = 32000;
  std::int64_t hidden = 1024;
  std::int64_t num_layers = 4;  // encoder and decoder each; >= 2
  double dropout = 0.2;
};
// Normalised Bahdanau attention with padding masked out.
struct BahdanauAttentionImpl : torch::nn::Module {
  explicit BahdanauAttentionImpl(std::int64_t hidden);
  // query [B, Tq, H], keys [B, Tk, H], key_lengths [B] -> context [B, Tq, H]
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& keys, const torch::Tensor& key_lengths);
  torch::nn::Linear linear_q{nullptr}, linear_k{nullptr};
  torch::Tensor linear_att, normalize_scalar, normalize_bias;
};
TORCH_MODULE(BahdanauAttention);
struct GnmtImpl : torch::nn::Module {
  explicit GnmtImpl(const GnmtOptions& options);
  // src [B, Ts], src_lengths [B], tgt_in [B, Tt] -> logits [B, Tt, vocab]
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& tgt_in);
  GnmtOptions options;
  torch::nn::Embedding embedding{nullptr};  // shared by encoder and decoder, as GNMT's shared vocabulary
  torch::nn::ModuleList encoder{nullptr};   // bidirectional LSTM, then unidirectional (residual from the 3rd)
  torch::nn::LSTM att_rnn{nullptr};
  BahdanauAttention attention{nullptr};
  torch::nn::ModuleList decoder{nullptr};   // LSTM(2H, H) layers fed [x, context] (residual from the 2nd)
  torch::nn::Linear classifier{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(Gnmt);
// Label-smoothed cross entropy per non-padding token (mean): (1 - eps) * NLL + eps * mean(-log p).
torch::Tensor label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, double smoothing,
                                  std::int64_t pad);

// --- cart: PyTorch's reinforce.py policy, Linear(4, 128), dropout 0.6, ReLU, Linear(128, 2), softmax.
struct PolicyImpl : torch::nn::Module {
  PolicyImpl();
  torch::Tensor forward(const torch::Tensor& state);  // [B, 4] -> action probabilities [B, 2]
  torch::nn::Linear affine1{nullptr}, affine2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Policy);

}  // namespace mlbench::bench
