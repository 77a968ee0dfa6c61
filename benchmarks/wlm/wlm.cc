// The wlm program, shared by wlm (fp32) and wlmfp16 (mixed precision, as
// bench::MixedPrecision runs it): PyTorch's word_language_model example over a
// wikitext-2 layout corpus that lives on the device as the example's does.
#include "benchmarks/wlm/wlm.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/dataset_path.h"
#include "benchmarks/support/torch_runtime.h"
#include "pipeline/formats/text_corpus.h"

namespace mlbench::bench {

namespace {

// wlm's own flags, beside the shared ones.
struct WlmOptions {
  RnnLmOptions model;
  std::int64_t bptt = 35;
  double lr = 20.0, clip = 0.25;
  bool untied = false;
  bool mixed_precision = false;
};

void add_flags(core::BenchCli& cli, const ProgramVariant& variant, WlmOptions& w) {
  RnnLmOptions& mo = w.model;
  cli.add_option("--model", mo.rnn_type, "Recurrent cell")->check(CLI::IsMember({"GRU", "LSTM"}));
  cli.add_option("--emsize", mo.ninp, "Word embedding size")->check(core::integer_in(1, 1 << 16));
  cli.add_option("--nhid", mo.nhid, "Hidden units per layer")->check(core::integer_in(1, 1 << 16));
  cli.add_option("--nlayers", mo.nlayers, "Recurrent layers")->check(core::integer_in(1, 64));
  cli.add_option("--dropout", mo.dropout, "Dropout")->check(core::number_in(0.0, 0.99));
  cli.add_option("--bptt", w.bptt, "Sequence length (truncated back-propagation)")->check(core::integer_in(1, 100000));
  cli.add_option("--lr", w.lr, "SGD learning rate")->check(core::number_above(0));
  cli.add_option("--clip", w.clip, "Gradient norm clipping")->check(core::number_above(0));
  cli.add_flag("--untied", w.untied, "Separate decoder weights (default: tied to the embedding)");
  w.mixed_precision = variant.mixed_precision;
  add_precision_flag(cli, variant, w.mixed_precision);
}

// The token ids batchified [nbatch, bs] and where they came from; sets the vocabulary size.
std::pair<torch::Tensor, std::string> load_tokens(const core::BenchOptions& o, WlmOptions& w) {
  if (o.synthetic) return {torch::randint(w.model.ntoken, {w.bptt + 1, o.batch_size}, torch::kInt64), "synthetic"};
  const auto dir = dataset_path(o, "wikitext2");
  const auto corpus = pipeline::read_wikitext(dir);
  w.model.ntoken = corpus.vocab.size();
  if (static_cast<std::int64_t>(corpus.train.size()) < 2 * o.batch_size) {
    throw pipeline::DataError(fmt::format("{}: {} tokens, too few for batch size {}", corpus.train_file.string(),
                                          corpus.train.size(), o.batch_size));
  }
  return {batchify(corpus.train, o.batch_size), corpus.train_file.string()};
}

core::Workload make_workload(const core::BenchOptions& o, WlmOptions w, const TorchContext& ctx) {
  RnnLmOptions& mo = w.model;
  if (mo.tied && mo.ninp != mo.nhid) throw core::UsageError("tied weights need --emsize equal to --nhid (or --untied)");
  auto precision = std::make_shared<MixedPrecision>(w.mixed_precision, ctx.device);
  auto [train, source] = load_tokens(o, w);
  // As the example: the whole batchified corpus lives on the device.
  train = train.to(ctx.device);
  RnnLm model(mo);
  model->to(ctx.device);
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(w.lr));
  struct State {
    std::int64_t pos = 0;
    RnnState hidden;
  };
  auto state = std::make_shared<State>();
  state->hidden = model->init_state(o.batch_size, ctx.device);
  const std::int64_t nbatch = train.size(0);
  const std::int64_t ntoken = mo.ntoken, bptt = w.bptt;
  const double clip = w.clip;
  core::Workload work;
  work.items_per_iteration = static_cast<double>(o.batch_size);
  work.step = [=, synthetic = o.synthetic, bs = o.batch_size, device = ctx.device](core::Iteration& it) mutable {
    const auto batch = it.wait([&] {
      if (state->pos >= nbatch - 1) {  // end of the corpus: a new epoch, fresh state
        state->pos = 0;
        state->hidden = model->init_state(bs, device);
      }
      const auto len = std::min(bptt, nbatch - 1 - state->pos);
      auto d = train.slice(0, state->pos, state->pos + len);
      auto t = train.slice(0, state->pos + 1, state->pos + 1 + len).reshape({-1});
      if (!synthetic) state->pos += len;
      return std::make_pair(d, t);
    });
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      torch::Tensor l;
      {
        auto scope = precision->autocast();
        auto out = model->forward(batch.first, state->hidden.detach());
        state->hidden = out.second;
        l = torch::nn::functional::cross_entropy(out.first.reshape({-1, ntoken}).to(torch::kFloat32), batch.second);
      }
      if (precision->backward(l, model->parameters())) {
        torch::nn::utils::clip_grad_norm_(model->parameters(), clip);
        optimizer->step();
      }
      return l;
    });
    it.set_loss(deferred_loss(loss));
  };
  const auto params = parameter_count(*model);
  work.finish = [=, source = source, bs = o.batch_size, synthetic = o.synthetic](nlohmann::json& report) {
    report["pipeline"] = {
        {"source", synthetic ? "synthetic" : "in-memory"}, {"dataset", source}, {"tokens", nbatch * bs}};
    auto& m = report["metrics"];
    m["parameters"] = params;
    m["vocabulary"] = ntoken;
    m["tokens_per_item"] = bptt;
    precision->report(m);
  };
  return work;
}

}  // namespace

int wlm_main(int argc, char** argv, const ProgramVariant& variant) {
  const std::string name = variant.name;
  core::BenchCli cli(name,
                     name + ": word language model (GRU 656, tied)" +
                         (variant.mixed_precision ? " in mixed precision" : "") + " on wikitext-2",
                     {.batch_size = variant.mixed_precision ? 128 : 64, .repeat = 15, .number = 5});
  WlmOptions w;
  add_flags(cli, variant, w);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  w.model.tied = !w.untied;
  return run_benchmark(cli, variant.source_hash,
                       [&](const TorchContext& ctx) { return make_workload(cli.options(), w, ctx); });
}

}  // namespace mlbench::bench
