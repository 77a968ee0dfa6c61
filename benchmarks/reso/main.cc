// reso: ESPCN sub-pixel super-resolution (PyTorch examples/super_resolution,
// Mila's reso), trained with Adam and MSE on the luma channel. High-resolution
// targets are random --image-size crops (plus flip) of natural-image-like
// JPEGs (bsds500: 481x321 as BSDS500) read through the instrumented pipeline;
// the low-resolution input is the target downscaled by --upscale (box filter)
// on the device.
#include <torch/torch.h>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/torch_runtime.h"
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
  cli.add_option("--upscale", upscale, "Super-resolution factor")->check(core::integer_in(2, 8));
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
    auto stream = bench::vision::make_image_stream(
        o, popts, ctx.device,
        {.dataset = "bsds500-small",
         .synthetic = [&] { return bench::vision::uniform_images(o.batch_size, size, 0, 1, ctx.device); },
         .transform =
             [size](pipeline::LoaderConfig& config) {
               // A random crop of side `size` (no rescaling) of a 481x321 image: the
               // RandomResizedCrop box with a fixed area share and ratio 1.
               const double share = std::min(1.0, static_cast<double>(size * size) / (481.0 * 321.0));
               config.transform.crop = {share, share, 1.0, 1.0};
               config.transform.normalize = {{0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};  // [0, 1]
             }});
    bench::vision::Espcn model(upscale);
    model->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));

    return bench::vision::image_workload(
        o, popts, stream,
        [=](const bench::vision::DeviceBatch& b) mutable {
          auto target = bench::vision::rgb_to_y(b.images);
          auto input = torch::avg_pool2d(target, upscale);
          optimizer->zero_grad();
          auto l = torch::mse_loss(model->forward(input), target);
          l.backward();
          optimizer->step();
          return l.detach();
        },
        [=](nlohmann::json& m) {
          m["parameters"] = bench::parameter_count(*model);
          m["upscale"] = upscale;
          m["hr_size"] = size;
        });
  });
}
