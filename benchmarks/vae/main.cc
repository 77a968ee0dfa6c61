// vae: PyTorch's VAE example (784-400-20, BCE + KL, Adam 1e-3) on MNIST read
// from the real IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte).
// mlbench-datagen's "mnist" recipe writes digit-like images in that format
// when the real files are absent. Batches are shuffled without replacement
// each epoch (the pipeline's Sampler) and gathered and converted to float on
// the pipeline's prefetch thread.
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/dataset_path.h"
#include "benchmarks/support/torch_runtime.h"
#include "pipeline/formats/idx.h"
#include "pipeline/loader_report.h"
#include "pipeline/options.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

struct VaeOptions {
  double lr = 1e-3;
  int prefetch = 2;
};

void add_flags(core::BenchCli& cli, VaeOptions& opt) {
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  pipeline::add_prefetch_flag(cli, opt.prefetch, "default 2; one background thread");
}

// The training images [N, 784] uint8 and where they came from (undefined and
// "synthetic" under --synthetic).
std::pair<torch::Tensor, std::string> load_mnist(const core::BenchOptions& o) {
  if (o.synthetic) return {torch::Tensor(), "synthetic"};
  const auto dir = bench::dataset_path(o, "mnist");
  const auto set = pipeline::read_mnist(dir, "train");
  if (set.rows * set.cols != 784) {
    throw std::runtime_error(
        fmt::format("{}: images are {}x{}, the VAE needs 28x28", dir.string(), set.rows, set.cols));
  }
  return {torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()), {set.count, 784}, torch::kUInt8).clone(),
          dir.string()};
}

core::Workload make_workload(const core::BenchOptions& o, const VaeOptions& opt, const torch::Device& device) {
  const std::int64_t bs = o.batch_size;
  const auto [images, source] = load_mnist(o);
  bench::Vae model;
  model->to(device);
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(opt.lr));
  // The pipeline's sampler (a fresh permutation each epoch, the example's
  // shuffle=True) and prefetch: batches are gathered and converted to float
  // on a background thread, --prefetch ahead.
  const std::int64_t n = images.defined() ? images.size(0) : 0;
  std::shared_ptr<pipeline::DataLoader<torch::Tensor>> batches;
  if (!o.synthetic) {
    batches = pipeline::in_memory_loader<torch::Tensor>(
        static_cast<std::size_t>(n), static_cast<std::size_t>(bs), opt.prefetch, static_cast<std::uint64_t>(o.seed),
        [images = images](const std::vector<std::size_t>& idx) {
          std::vector<std::int64_t> rows(idx.begin(), idx.end());
          auto index = torch::from_blob(rows.data(), {static_cast<std::int64_t>(rows.size())}, torch::kInt64);
          return images.index_select(0, index).to(torch::kFloat32).div_(255.0);
        });
  }
  std::optional<torch::Tensor> fixed;
  if (o.synthetic) fixed = torch::rand({bs, 784}).to(device);
  core::Workload work;
  work.items_per_iteration = static_cast<double>(bs);
  work.step = [=](core::Iteration& it) mutable {
    torch::Tensor x = fixed ? *fixed : it.wait([&] { return *batches->next(); });
    if (!fixed) x = it.h2d([&] { return x.to(device, true); });
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      auto [recon, mu, logvar] = model->forward(x);
      auto l = bench::vae_loss(recon, x, mu, logvar);
      l.backward();
      optimizer->step();
      return l / static_cast<double>(bs);  // per image, as the example prints it
    });
    it.set_loss(bench::deferred_loss(loss));
  };
  work.finish = [=, source = source, params = bench::parameter_count(*model)](nlohmann::json& report) {
    report["pipeline"] = pipeline::in_memory_report(batches.get(), source, static_cast<std::size_t>(n));
    report["metrics"]["parameters"] = params;
  };
  return work;
}

int run(const core::BenchCli& cli, const VaeOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    return make_workload(cli.options(), opt, ctx.device);
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("vae", "vae: variational auto-encoder 784-400-20 on MNIST",
                     {.batch_size = 128, .repeat = 50, .number = 30});
  VaeOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
