// The LibTorch models of toy_lstm, vae, wlm, recom, translator and cart:
// output shapes, parameter counts against the published architectures (the
// counts are written out layer by layer), and losses on known inputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"

using namespace mlbench::bench;

namespace {
// LSTM layer parameters: 4 gates x (input + hidden weights + two biases).
std::int64_t lstm_params(std::int64_t in, std::int64_t h) { return 4 * h * (in + h) + 8 * h; }
std::int64_t gru_params(std::int64_t in, std::int64_t h) { return 3 * h * (in + h) + 6 * h; }
}  // namespace

TEST(SineSequence, ShapeAndParameters) {
  SineSequence m;
  auto out = m->forward(torch::randn({3, 7}));
  EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(parameter_count(*m), lstm_params(1, 51) + lstm_params(51, 51) + 52);
  EXPECT_EQ(parameter_count(*m), 32284);
}

TEST(SineSequence, WavesAreSinesShiftedWithinFourPeriods) {
  auto w = sine_waves(5, 50, 20.0, 3);
  EXPECT_EQ(w.sizes(), (std::vector<std::int64_t>{5, 50}));
  EXPECT_EQ(w.scalar_type(), torch::kFloat64);
  // sin((t + s) / 20): consecutive values obey the sine recurrence.
  auto a = w.accessor<double, 2>();
  const double k = 2 * std::cos(1.0 / 20.0);
  for (int t = 1; t + 1 < 50; ++t) EXPECT_NEAR(a[2][t + 1], k * a[2][t] - a[2][t - 1], 1e-12);
  EXPECT_TRUE(torch::equal(w, sine_waves(5, 50, 20.0, 3)));
}

TEST(Vae, ShapesParametersAndLoss) {
  Vae m;
  auto x = torch::rand({4, 784});
  auto [recon, mu, logvar] = m->forward(x);
  EXPECT_EQ(recon.sizes(), (std::vector<std::int64_t>{4, 784}));
  EXPECT_EQ(mu.sizes(), (std::vector<std::int64_t>{4, 20}));
  EXPECT_EQ(logvar.sizes(), (std::vector<std::int64_t>{4, 20}));
  EXPECT_EQ(parameter_count(*m), (784 * 400 + 400) + 2 * (400 * 20 + 20) + (20 * 400 + 400) + (400 * 784 + 784));
  EXPECT_GT(recon.min().item<float>(), 0.0f);
  // Perfect posterior (mu 0, logvar 0) adds no KL; recon 0.5 costs 784 ln 2 per image on any target.
  auto half = torch::full({1, 784}, 0.5);
  auto zeros = torch::zeros({1, 20});
  EXPECT_NEAR(vae_loss(half, torch::rand({1, 784}), zeros, zeros).item<double>(), 784 * std::log(2.0), 1e-2);
  EXPECT_NEAR(vae_loss(half, half, torch::ones({1, 20}), zeros).item<double>(), 784 * std::log(2.0) + 10.0, 1e-2);
}

TEST(RnnLm, TiedGruMatchesPublishedSize) {
  RnnLmOptions o;  // GRU 656 x 2, wikitext-2 vocabulary 33278, tied
  RnnLm m(o);
  EXPECT_EQ(parameter_count(*m), 33278 * 656 + gru_params(656, 656) * 2 + 33278);
  EXPECT_EQ(parameter_count(*m), 27035550);
}

TEST(RnnLm, ForwardShapesGruAndLstmAndUntied) {
  for (const char* type : {"GRU", "LSTM"}) {
    RnnLmOptions o;
    o.rnn_type = type;
    o.ntoken = 50;
    o.ninp = o.nhid = 16;
    RnnLm m(o);
    auto state = m->init_state(3, torch::kCPU);
    auto [logits, next] = m->forward(torch::randint(50, {5, 3}, torch::kInt64), state);
    EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{5, 3, 50}));
    EXPECT_EQ(next.h.sizes(), (std::vector<std::int64_t>{2, 3, 16}));
    EXPECT_EQ(next.c.defined(), std::string(type) == "LSTM");
  }
  RnnLmOptions o;
  o.ntoken = 50;
  o.ninp = o.nhid = 16;
  o.tied = false;
  EXPECT_EQ(parameter_count(*RnnLm(o)), 50 * 16 + gru_params(16, 16) * 2 + 50 * 16 + 50);
  o.tied = true;
  o.ninp = 8;
  EXPECT_THROW(RnnLm{o}, std::invalid_argument);
}

TEST(RnnLm, BatchifyColumnsAreContiguousStreams) {
  std::vector<std::int32_t> ids(11);
  for (int i = 0; i < 11; ++i) ids[i] = i;
  auto b = batchify(ids, 2);  // 5 rows, 2 columns; the 11th token dropped
  EXPECT_EQ(b.sizes(), (std::vector<std::int64_t>{5, 2}));
  EXPECT_EQ(b[0][1].item<std::int64_t>(), 5);
  EXPECT_EQ(b[4][0].item<std::int64_t>(), 4);
}

TEST(NeuMF, Ml20mSizeAndShapes) {
  NeuMFOptions o;  // ml-20m: 138493 users, 26744 movies
  NeuMF m(o);
  const std::int64_t entities = 138493 + 26744;
  EXPECT_EQ(parameter_count(*m),
            entities * 64 + entities * 128 + (256 * 256 + 256) + (256 * 128 + 128) + (128 * 64 + 64) + (128 + 1));
  auto logits = m->forward(torch::tensor({0, 5, 138492}, torch::kInt64), torch::tensor({1, 26743, 0}, torch::kInt64));
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{3}));
}

TEST(Gnmt, ParametersLayerByLayer) {
  GnmtOptions o;
  o.vocab = 100;
  o.hidden = 8;
  o.num_layers = 4;
  Gnmt m(o);
  const std::int64_t h = 8, v = 100;
  const std::int64_t encoder = 2 * lstm_params(h, h) + lstm_params(2 * h, h) + 2 * lstm_params(h, h);
  const std::int64_t attention = 2 * h * h + h + 1 + h;
  const std::int64_t decoder = lstm_params(h, h) + attention + 3 * lstm_params(2 * h, h) + (h * v + v);
  EXPECT_EQ(parameter_count(*m), v * h + encoder + decoder);
}

TEST(Gnmt, ForwardShapesAndPaddingIsMasked) {
  GnmtOptions o;
  o.vocab = 30;
  o.hidden = 8;
  o.num_layers = 2;
  o.dropout = 0.0;
  Gnmt m(o);
  m->eval();
  auto src = torch::randint(4, 30, {2, 6}, torch::kInt64);
  auto lengths = torch::tensor({6, 3}, torch::kInt64);
  auto tgt = torch::randint(4, 30, {2, 5}, torch::kInt64);
  auto logits = m->forward(src, lengths, tgt);
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{2, 5, 30}));
  // Attention weights: keys past a sentence's length get none.
  BahdanauAttention att(4);
  auto keys = torch::randn({1, 3, 4});
  auto ctx_short = att->forward(torch::randn({1, 2, 4}), keys, torch::tensor({1}, torch::kInt64));
  EXPECT_TRUE(torch::allclose(ctx_short, keys.slice(1, 0, 1).expand({1, 2, 4})));
  EXPECT_THROW(Gnmt(GnmtOptions{.vocab = 10, .hidden = 4, .num_layers = 1}), std::invalid_argument);
}

TEST(LabelSmoothing, MatchesDefinitionAndIgnoresPadding) {
  // Uniform logits over V classes: NLL = smooth term = ln V, whatever eps.
  auto logits = torch::zeros({1, 3, 10});
  auto target = torch::tensor({{4, 5, 0}}, torch::kInt64);
  EXPECT_NEAR(label_smoothed_loss(logits, target, 0.1, 0).item<double>(), std::log(10.0), 1e-6);
  // eps 0 is cross entropy over the two real tokens.
  auto l2 = torch::randn({1, 3, 10});
  auto ce = torch::nn::functional::cross_entropy(l2.view({3, 10}).slice(0, 0, 2), target.view({3}).slice(0, 0, 2));
  EXPECT_NEAR(label_smoothed_loss(l2, target, 0.0, 0).item<double>(), ce.item<double>(), 1e-5);
}

TEST(Policy, ShapeParametersProbabilities) {
  Policy p;
  auto probs = p->forward(torch::randn({5, 4}));
  EXPECT_EQ(probs.sizes(), (std::vector<std::int64_t>{5, 2}));
  EXPECT_TRUE(torch::allclose(probs.sum(1), torch::ones({5})));
  EXPECT_EQ(parameter_count(*p), (4 * 128 + 128) + (128 * 2 + 2));
}
