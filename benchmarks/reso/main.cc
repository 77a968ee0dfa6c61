// reso: ESPCN sub-pixel super-resolution (PyTorch examples/super_resolution,
// Mila's reso), trained with Adam and MSE on the luma channel. High-resolution
// targets are random --image-size crops (plus flip) of natural-image-like
// JPEGs (bsds500: 481x321 as BSDS500) read through the instrumented pipeline;
// the low-resolution input is the target downscaled by --upscale (box filter)
// on the device.
#include <torch/torch.h>

#include "benchmarks/common/image_bench.h"
#include "benchmarks/common/torch_runtime.h"
#include "benchmarks/common/vision_models.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("reso", "reso: ESPCN super-resolution on the Y channel (Adam, MSE)",
                     {.batch_size = 64, .repeat = 25, .number = 5, .workers = 4});
  pipeline::PipelineOptions popts;
  popts.image_size = 256;
  pipeline::add_pipeline_flags(cli, popts);
  std::int64_t upscale = 2;
  double lr = 0.01;
  cli.add_option("--upscale", upscale, "Super-resolution factor")->check(CLI::Range(2, 8));
  cli.add_option("--lr", lr, "Adam learning rate")->check(core::number_above(0));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (popts.image_size % upscale != 0) {
    std::cerr << "reso: error: --image-size " << popts.image_size << " is not a multiple of --upscale " << upscale
              << "\n";
    return 2;
  }

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const core::BenchOptions& o = cli.options();
    const std::int64_t size = popts.image_size;
    std::shared_ptr<bench::vision::ImageStream> stream;
    if (o.synthetic) {
      bench::vision::DeviceBatch b;
      b.images = torch::rand({o.batch_size, 3, size, size}, torch::TensorOptions().device(ctx.device));
      stream = std::make_shared<bench::vision::ImageStream>(b);
    } else {
      const std::string path = bench::vision::default_data_path(o, "bsds500-small", "train");
      auto source = bench::vision::open_image_folder(o, path, "bsds500-small", popts);
      auto config = bench::vision::loader_config(o, popts, ctx.device);
      // A random crop of side `size` (no rescaling) of a 481x321 image: the
      // RandomResizedCrop box with a fixed area share and ratio 1.
      const double share = std::min(1.0, static_cast<double>(size * size) / (481.0 * 321.0));
      config.transform.crop = {share, share, 1.0, 1.0};
      config.transform.normalize = {{0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};  // [0, 1]
      stream = std::make_shared<bench::vision::ImageStream>(source, config, ctx.device);
    }
    bench::vision::Espcn model(upscale);
    model->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));

    core::Workload work;
    work.items_per_iteration = o.batch_size;
    work.step = [=](core::Iteration& it) mutable {
      auto b = stream->next(it);
      if (popts.fetch_only) return;  // --fetch-only: the pipeline alone, no model step
      auto loss = it.compute([&] {
        auto target = bench::vision::rgb_to_y(b.images);
        auto input = torch::avg_pool2d(target, upscale);
        optimizer->zero_grad();
        auto l = torch::mse_loss(model->forward(input), target);
        l.backward();
        optimizer->step();
        return l.detach();
      });
      it.set_loss(bench::deferred_loss(loss));
    };
    work.finish = [=](nlohmann::json& report) {
      stream->finish(report);
      report["metrics"]["parameters"] = bench::vision::parameter_count(*model);
      report["metrics"]["upscale"] = upscale;
      report["metrics"]["hr_size"] = size;
    };
    return work;
  });
}
