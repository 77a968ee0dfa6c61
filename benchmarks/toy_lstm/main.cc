// toy_lstm: PyTorch's time_sequence_prediction as the Mila suite ran it — two
// stacked LSTMCell(51) + Linear(51, 1) learn to predict the next value of sine
// waves (100 waves x 1000 steps generated in memory, 97 for training), MSE
// loss, SGD. Per-step framework overhead dominates: ~1000 small cell calls.
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

struct ToyLstmOptions {
  std::string dtype = "float32";
  double lr = 0.01;
  std::int64_t waves = 100, length = 1000, hidden = 51;
};

void add_flags(core::BenchCli& cli, ToyLstmOptions& opt) {
  cli.add_option("--dtype", opt.dtype, "Model float type")->check(CLI::IsMember({"float32", "float64"}));
  cli.add_option("--lr", opt.lr, "SGD learning rate")->check(core::number_above(0));
  cli.add_option("--waves", opt.waves, "Sine waves generated (the first 3 are held out, as the example)")
      ->check(core::integer_in(4, 100000));
  cli.add_option("--length", opt.length, "Steps per wave")->check(core::integer_in(2, 1000000));
  cli.add_option("--hidden", opt.hidden, "LSTMCell width")->check(core::integer_in(1, 100000));
}

core::Workload make_workload(const core::BenchOptions& o, const ToyLstmOptions& opt, const torch::Device& device) {
  const auto type = opt.dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
  // Waves 0..2 are the example's test set; training cycles through the rest.
  const auto data = bench::sine_waves(opt.waves, opt.length, 20.0, static_cast<std::uint64_t>(o.seed)).to(type);
  const auto train = data.slice(0, 3);
  const std::int64_t n_train = train.size(0);
  bench::SineSequence model(opt.hidden);
  model->to(device, type);
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(opt.lr));
  const std::int64_t bs = o.batch_size;
  auto cursor = std::make_shared<std::int64_t>(0);
  auto next_batch = [=] {
    auto idx = (torch::arange(bs, torch::kInt64) + *cursor) % n_train;
    *cursor = (*cursor + bs) % n_train;
    auto waves_batch = train.index_select(0, idx);
    return std::make_pair(waves_batch.slice(1, 0, -1), waves_batch.slice(1, 1));
  };
  std::optional<std::pair<torch::Tensor, torch::Tensor>> fixed;
  if (o.synthetic) {
    auto b = next_batch();
    fixed = std::make_pair(b.first.to(device), b.second.to(device));
  }
  core::Workload work;
  work.items_per_iteration = static_cast<double>(bs);
  work.step = [=](core::Iteration& it) mutable {
    auto batch = fixed ? *fixed : it.wait(next_batch);
    if (!fixed) {
      batch = it.h2d([&] { return std::make_pair(batch.first.to(device, true), batch.second.to(device, true)); });
    }
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      auto l = torch::mse_loss(model->forward(batch.first), batch.second);
      l.backward();
      optimizer->step();
      return l;
    });
    it.set_loss(bench::deferred_loss(loss));
  };
  work.finish = [params = bench::parameter_count(*model), waves = opt.waves, length = opt.length,
                 synthetic = o.synthetic](nlohmann::json& report) {
    report["pipeline"] = {{"source", synthetic ? "synthetic" : "in-memory"},
                          {"dataset", fmt::format("{} sine waves x {} steps (generated)", waves, length)}};
    report["metrics"]["parameters"] = params;
    report["metrics"]["steps_per_sequence"] = length - 1;
  };
  return work;
}

int run(const core::BenchCli& cli, const ToyLstmOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    return make_workload(cli.options(), opt, ctx.device);
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("toy_lstm", "toy_lstm: two stacked LSTMCell(51) predicting sine waves",
                     {.batch_size = 1, .repeat = 10, .number = 5});
  ToyLstmOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
