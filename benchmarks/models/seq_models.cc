#include "benchmarks/models/seq_models.h"

#include <random>
#include <set>
#include <stdexcept>

namespace mlbench::bench {

namespace nn = torch::nn;

// --- toy_lstm

SineSequenceImpl::SineSequenceImpl(std::int64_t hidden_size) : hidden(hidden_size) {
  lstm1 = register_module("lstm1", nn::LSTMCell(1, hidden));
  lstm2 = register_module("lstm2", nn::LSTMCell(hidden, hidden));
  linear = register_module("linear", nn::Linear(hidden, 1));
}

torch::Tensor SineSequenceImpl::forward(const torch::Tensor& input) {
  const auto opts = input.options();
  auto h1 = torch::zeros({input.size(0), hidden}, opts), c1 = torch::zeros_like(h1);
  auto h2 = torch::zeros_like(h1), c2 = torch::zeros_like(h1);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(static_cast<std::size_t>(input.size(1)));
  for (const auto& x : input.chunk(input.size(1), 1)) {
    std::tie(h1, c1) = lstm1->forward(x, std::make_tuple(h1, c1));
    std::tie(h2, c2) = lstm2->forward(h1, std::make_tuple(h2, c2));
    outputs.push_back(linear->forward(h2));
  }
  return torch::stack(outputs, 1).squeeze(2);
}

torch::Tensor sine_waves(std::int64_t waves, std::int64_t length, double period_t, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto span = static_cast<std::int64_t>(4 * period_t);
  std::uniform_int_distribution<std::int64_t> shift(-span, span - 1);
  auto out = torch::empty({waves, length}, torch::kFloat64);
  auto a = out.accessor<double, 2>();
  for (std::int64_t i = 0; i < waves; ++i) {
    const std::int64_t s = shift(rng);
    for (std::int64_t t = 0; t < length; ++t) a[i][t] = std::sin(static_cast<double>(t + s) / period_t);
  }
  return out;
}

// --- vae

VaeImpl::VaeImpl(std::int64_t input, std::int64_t hidden, std::int64_t latent) {
  fc1 = register_module("fc1", nn::Linear(input, hidden));
  fc21 = register_module("fc21", nn::Linear(hidden, latent));
  fc22 = register_module("fc22", nn::Linear(hidden, latent));
  fc3 = register_module("fc3", nn::Linear(latent, hidden));
  fc4 = register_module("fc4", nn::Linear(hidden, input));
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> VaeImpl::forward(const torch::Tensor& x) {
  auto h1 = torch::relu(fc1->forward(x));
  auto mu = fc21->forward(h1);
  auto logvar = fc22->forward(h1);
  auto z = is_training() ? mu + torch::randn_like(mu) * torch::exp(0.5 * logvar) : mu;
  auto recon = torch::sigmoid(fc4->forward(torch::relu(fc3->forward(z))));
  return {recon, mu, logvar};
}

torch::Tensor vae_loss(const torch::Tensor& recon, const torch::Tensor& x, const torch::Tensor& mu,
                       const torch::Tensor& logvar) {
  auto bce = torch::binary_cross_entropy(recon, x, {}, at::Reduction::Sum);
  auto kld = -0.5 * torch::sum(1 + logvar - mu.pow(2) - logvar.exp());
  return bce + kld;
}

// --- wlm

RnnLmImpl::RnnLmImpl(const RnnLmOptions& o) : options(o) {
  if (o.rnn_type != "GRU" && o.rnn_type != "LSTM") {
    throw std::invalid_argument("--model must be GRU or LSTM, got '" + o.rnn_type + "'");
  }
  if (o.tied && o.ninp != o.nhid) throw std::invalid_argument("tied weights need --emsize equal to --nhid");
  encoder = register_module("encoder", nn::Embedding(o.ntoken, o.ninp));
  drop = register_module("drop", nn::Dropout(o.dropout));
  if (o.rnn_type == "GRU") {
    gru = register_module("rnn", nn::GRU(nn::GRUOptions(o.ninp, o.nhid).num_layers(o.nlayers).dropout(o.dropout)));
  } else {
    lstm = register_module("rnn", nn::LSTM(nn::LSTMOptions(o.ninp, o.nhid).num_layers(o.nlayers).dropout(o.dropout)));
  }
  torch::NoGradGuard no_grad;
  encoder->weight.uniform_(-0.1, 0.1);
  if (o.tied) {
    decoder_weight = encoder->weight;  // same tensor: one parameter, as the example's decoder.weight = encoder.weight
  } else {
    decoder_weight = register_parameter("decoder_weight", torch::empty({o.ntoken, o.nhid}).uniform_(-0.1, 0.1));
  }
  decoder_bias = register_parameter("decoder_bias", torch::zeros({o.ntoken}));
}

std::pair<torch::Tensor, RnnState> RnnLmImpl::forward(const torch::Tensor& input, const RnnState& state) {
  auto emb = drop->forward(encoder->forward(input));
  torch::Tensor out;
  RnnState next;
  if (gru) {
    std::tie(out, next.h) = gru->forward(emb, state.h);
  } else {
    std::tuple<torch::Tensor, torch::Tensor> hc;
    std::tie(out, hc) = lstm->forward(emb, std::make_tuple(state.h, state.c));
    next.h = std::get<0>(hc);
    next.c = std::get<1>(hc);
  }
  out = drop->forward(out);
  return {torch::nn::functional::linear(out, decoder_weight, decoder_bias), next};
}

RnnState RnnLmImpl::init_state(std::int64_t batch, const torch::Device& device) const {
  auto z = torch::zeros({options.nlayers, batch, options.nhid}, torch::TensorOptions().device(device));
  return {z, lstm ? torch::zeros_like(z) : torch::Tensor()};
}

torch::Tensor batchify(const std::vector<std::int32_t>& ids, std::int64_t batch) {
  const auto n = static_cast<std::int64_t>(ids.size()) / batch;
  if (n < 2) throw std::invalid_argument("corpus too small for the batch size");
  auto flat = torch::from_blob(const_cast<std::int32_t*>(ids.data()), {n * batch}, torch::kInt32).to(torch::kInt64);
  return flat.view({batch, n}).t().contiguous();
}

// --- recom

NeuMFImpl::NeuMFImpl(const NeuMFOptions& o) : options(o) {
  if (o.layers.empty() || o.layers[0] % 2 != 0) throw std::invalid_argument("NeuMF layers[0] must be even");
  const auto mlp_dim = o.layers[0] / 2;
  mf_user = register_module("mf_user", nn::Embedding(o.num_users, o.mf_dim));
  mf_item = register_module("mf_item", nn::Embedding(o.num_items, o.mf_dim));
  mlp_user = register_module("mlp_user", nn::Embedding(o.num_users, mlp_dim));
  mlp_item = register_module("mlp_item", nn::Embedding(o.num_items, mlp_dim));
  mlp = register_module("mlp", nn::ModuleList());
  for (std::size_t i = 1; i < o.layers.size(); ++i) mlp->push_back(nn::Linear(o.layers[i - 1], o.layers[i]));
  final = register_module("final", nn::Linear(o.mf_dim + o.layers.back(), 1));
  torch::NoGradGuard no_grad;
  for (auto* e : {&mf_user, &mf_item, &mlp_user, &mlp_item}) (*e)->weight.normal_(0.0, 0.01);
  for (const auto& m : *mlp) {
    auto* lin = m->as<nn::Linear>();
    nn::init::xavier_uniform_(lin->weight);
    lin->bias.zero_();
  }
  nn::init::kaiming_uniform_(final->weight, 1.0, torch::kFanIn, torch::kSigmoid);  // LeCun uniform
  final->bias.zero_();
}

torch::Tensor NeuMFImpl::forward(const torch::Tensor& user, const torch::Tensor& item) {
  auto gmf = mf_user->forward(user) * mf_item->forward(item);
  auto x = torch::cat({mlp_user->forward(user), mlp_item->forward(item)}, 1);
  for (const auto& m : *mlp) x = torch::relu(m->as<nn::Linear>()->forward(x));
  return final->forward(torch::cat({gmf, x}, 1)).squeeze(1);
}

// --- translator

BahdanauAttentionImpl::BahdanauAttentionImpl(std::int64_t hidden) {
  linear_q = register_module("linear_q", nn::Linear(nn::LinearOptions(hidden, hidden).bias(false)));
  linear_k = register_module("linear_k", nn::Linear(nn::LinearOptions(hidden, hidden).bias(false)));
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  linear_att = register_parameter("linear_att", torch::empty({hidden}).uniform_(-bound, bound));
  normalize_scalar = register_parameter("normalize_scalar", torch::full({1}, bound));
  normalize_bias = register_parameter("normalize_bias", torch::zeros({hidden}));
}

torch::Tensor BahdanauAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& keys,
                                             const torch::Tensor& key_lengths) {
  auto pq = linear_q->forward(query).unsqueeze(2);  // [B, Tq, 1, H]
  auto pk = linear_k->forward(keys).unsqueeze(1);   // [B, 1, Tk, H]
  auto v = linear_att / linear_att.norm() * normalize_scalar;
  auto scores = torch::tanh(pq + pk + normalize_bias).matmul(v.to(pq.scalar_type()));  // [B, Tq, Tk]
  auto positions = torch::arange(keys.size(1), key_lengths.options()).unsqueeze(0);
  auto pad = (positions >= key_lengths.unsqueeze(1)).unsqueeze(1);  // [B, 1, Tk]
  scores = scores.masked_fill(pad, -std::numeric_limits<float>::infinity());
  auto p = torch::softmax(scores, -1);
  return torch::bmm(p.to(keys.scalar_type()), keys);
}

GnmtImpl::GnmtImpl(const GnmtOptions& o) : options(o) {
  if (o.num_layers < 2) throw std::invalid_argument("GNMT needs at least 2 layers");
  const auto h = o.hidden;
  auto lstm = [](std::int64_t in, std::int64_t hid, bool bidir) {
    return nn::LSTM(nn::LSTMOptions(in, hid).batch_first(true).bidirectional(bidir));
  };
  embedding = register_module("embedding", nn::Embedding(nn::EmbeddingOptions(o.vocab, h).padding_idx(0)));
  encoder = register_module("encoder", nn::ModuleList());
  encoder->push_back(lstm(h, h, true));
  encoder->push_back(lstm(2 * h, h, false));
  for (std::int64_t i = 2; i < o.num_layers; ++i) encoder->push_back(lstm(h, h, false));
  att_rnn = register_module("att_rnn", lstm(h, h, false));
  attention = register_module("attention", BahdanauAttention(h));
  decoder = register_module("decoder", nn::ModuleList());
  for (std::int64_t i = 1; i < o.num_layers; ++i) decoder->push_back(lstm(2 * h, h, false));
  classifier = register_module("classifier", nn::Linear(h, o.vocab));
  drop = register_module("drop", nn::Dropout(o.dropout));
  torch::NoGradGuard no_grad;
  // MLPerf GNMT: every weight uniform in [-0.1, 0.1].
  for (auto& p : parameters()) {
    if (p.dim() >= 2) p.uniform_(-0.1, 0.1);
  }
}

torch::Tensor GnmtImpl::forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                const torch::Tensor& tgt_in) {
  auto run = [](const std::shared_ptr<nn::Module>& m, const torch::Tensor& x) {
    return std::get<0>(m->as<nn::LSTM>()->forward(x));
  };
  // Encoder (padded positions run through the LSTMs; attention masks them).
  auto x = drop->forward(embedding->forward(src));
  x = run(encoder[0], x);
  x = run(encoder[1], drop->forward(x));
  for (std::size_t i = 2; i < encoder->size(); ++i) x = x + run(encoder[i], drop->forward(x));
  const auto memory = x;
  // Decoder, teacher-forced: the attention LSTM runs over the whole target, then
  // attends for every step at once (as MLPerf's RecurrentAttention in training).
  auto y = drop->forward(embedding->forward(tgt_in));
  y = run(att_rnn.ptr(), y);
  auto context = attention->forward(y, memory, src_lengths);
  for (std::size_t i = 0; i < decoder->size(); ++i) {
    auto out = run(decoder[i], torch::cat({drop->forward(y), context}, 2));
    y = i >= 1 ? out + y : out;
  }
  return classifier->forward(drop->forward(y));
}

torch::Tensor label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, double smoothing,
                                  std::int64_t pad) {
  auto logp = torch::log_softmax(logits.to(torch::kFloat32), -1);
  auto nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1);
  auto smooth = -logp.mean(-1);
  auto loss = (1.0 - smoothing) * nll + smoothing * smooth;
  auto mask = target.ne(pad).to(loss.scalar_type());
  return (loss * mask).sum() / mask.sum().clamp_min(1.0);
}

// --- cart

PolicyImpl::PolicyImpl() {
  affine1 = register_module("affine1", nn::Linear(4, 128));
  dropout = register_module("dropout", nn::Dropout(0.6));
  affine2 = register_module("affine2", nn::Linear(128, 2));
}

torch::Tensor PolicyImpl::forward(const torch::Tensor& state) {
  auto x = torch::relu(dropout->forward(affine1->forward(state)));
  return torch::softmax(affine2->forward(x), 1);
}

}  // namespace mlbench::bench
