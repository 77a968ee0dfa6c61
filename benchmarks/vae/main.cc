// vae: PyTorch's VAE example (784-400-20, BCE + KL, Adam 1e-3) on MNIST read
// from the real IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte).
// mlbench-datagen's "mnist" recipe writes digit-like images in that format
// when the real files are absent. Batches are shuffled without replacement
// each epoch and converted to float in the wait phase.
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/common/dataset_path.h"
#include "benchmarks/common/idx_reader.h"
#include "benchmarks/common/seq_models.h"
#include "benchmarks/common/torch_runtime.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("vae", "vae: variational auto-encoder 784-400-20 on MNIST",
                     {.batch_size = 128, .repeat = 50, .number = 30});
  double lr = 1e-3;
  cli.add_option("--lr", lr, "Adam learning rate")->check(CLI::PositiveNumber);
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const auto& o = cli.options();
    const std::int64_t bs = o.batch_size;
    torch::Tensor images;  // [N, 784] uint8
    std::string source = "synthetic";
    if (!o.synthetic) {
      const auto dir = bench::dataset_path(o, "mnist");
      const auto set = bench::read_mnist(dir, "train");
      if (set.rows * set.cols != 784) {
        throw std::runtime_error(fmt::format("{}: images are {}x{}, the VAE needs 28x28", dir.string(), set.rows, set.cols));
      }
      images = torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()), {set.count, 784}, torch::kUInt8).clone();
      source = dir.string();
    }
    bench::Vae model;
    model->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
    // Epoch-wise shuffled sampler over the images (the example's shuffle=True).
    struct Sampler {
      torch::Tensor order;
      std::int64_t pos = 0;
    };
    auto sampler = std::make_shared<Sampler>();
    const std::int64_t n = images.defined() ? images.size(0) : 0;
    auto next_batch = [=] {
      std::vector<torch::Tensor> parts;
      std::int64_t need = bs;
      while (need > 0) {
        if (!sampler->order.defined() || sampler->pos >= n) {
          sampler->order = torch::randperm(n, torch::kInt64);
          sampler->pos = 0;
        }
        const auto take = std::min(need, n - sampler->pos);
        parts.push_back(sampler->order.slice(0, sampler->pos, sampler->pos + take));
        sampler->pos += take;
        need -= take;
      }
      return images.index_select(0, torch::cat(parts)).to(torch::kFloat32).div_(255.0);
    };
    std::optional<torch::Tensor> fixed;
    if (o.synthetic) fixed = torch::rand({bs, 784}).to(ctx.device);
    core::Workload work;
    work.items_per_iteration = static_cast<double>(bs);
    work.step = [=, device = ctx.device](core::Iteration& it) mutable {
      torch::Tensor x = fixed ? *fixed : it.wait(next_batch);
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
      report["pipeline"] = {{"source", fixed ? "synthetic" : "in-memory"}, {"dataset", source}, {"images", n}};
      report["metrics"]["parameters"] = params;
    };
    return work;
  });
}
