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

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("vae", "vae: variational auto-encoder 784-400-20 on MNIST",
                     {.batch_size = 128, .repeat = 50, .number = 30});
  double lr = 1e-3;
  int prefetch = 2;
  cli.add_option("--lr", lr, "Adam learning rate")->check(core::number_above(0));
  pipeline::add_prefetch_flag(cli, prefetch, "default 2; one background thread");
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const auto& o = cli.options();
    const std::int64_t bs = o.batch_size;
    torch::Tensor images;  // [N, 784] uint8
    std::string source = "synthetic";
    if (!o.synthetic) {
      const auto dir = bench::dataset_path(o, "mnist");
      const auto set = pipeline::read_mnist(dir, "train");
      if (set.rows * set.cols != 784) {
        throw std::runtime_error(fmt::format("{}: images are {}x{}, the VAE needs 28x28", dir.string(), set.rows, set.cols));
      }
      images = torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()), {set.count, 784}, torch::kUInt8).clone();
      source = dir.string();
    }
    bench::Vae model;
    model->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
    // The pipeline's sampler (a fresh permutation each epoch, the example's
    // shuffle=True) and prefetch: batches are gathered and converted to float
    // on a background thread, --prefetch ahead.
    const std::int64_t n = images.defined() ? images.size(0) : 0;
    std::shared_ptr<pipeline::DataLoader<torch::Tensor>> batches;
    if (!o.synthetic) {
      batches = pipeline::in_memory_loader<torch::Tensor>(
          static_cast<std::size_t>(n), static_cast<std::size_t>(bs), prefetch, static_cast<std::uint64_t>(o.seed),
          [images](const std::vector<std::size_t>& idx) {
            std::vector<std::int64_t> rows(idx.begin(), idx.end());
            auto index = torch::from_blob(rows.data(), {static_cast<std::int64_t>(rows.size())}, torch::kInt64);
            return images.index_select(0, index).to(torch::kFloat32).div_(255.0);
          });
    }
    std::optional<torch::Tensor> fixed;
    if (o.synthetic) fixed = torch::rand({bs, 784}).to(ctx.device);
    core::Workload work;
    work.items_per_iteration = static_cast<double>(bs);
    work.step = [=, device = ctx.device](core::Iteration& it) mutable {
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
    const auto params = bench::parameter_count(*model);
    work.finish = [=](nlohmann::json& report) {
      report["pipeline"] = pipeline::in_memory_report(batches.get(), source, static_cast<std::size_t>(n));
      report["metrics"]["parameters"] = params;
    };
    return work;
  });
}
