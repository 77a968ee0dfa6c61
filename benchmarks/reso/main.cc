// reso: ESPCN sub-pixel super-resolution (PyTorch examples/super_resolution,
// Mila's reso), trained with Adam and MSE on the luma channel. High-resolution
// targets are random --image-size crops (plus flip) of natural-image-like
// JPEGs (bsds500: 481x321 as BSDS500) read through the instrumented pipeline;
// the low-resolution input is the target downscaled by --upscale (box filter)
// on the device.
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_benchmark.h"
#include "source_hash.h"

namespace {

using namespace mlbench;
namespace v = bench::vision;

struct ResoOptions {
  std::int64_t upscale = 2;
  double lr = 0.01;
};

void add_flags(core::BenchCli& cli, ResoOptions& opt) {
  cli.add_option("--upscale", opt.upscale, "Super-resolution factor")->check(core::integer_in(2, 8));
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
}

std::string image_size_error(const ResoOptions& opt, const pipeline::PipelineOptions& p) {
  if (p.image_size % opt.upscale == 0) return "";
  return fmt::format("--image-size {} is not a multiple of --upscale {}", p.image_size, opt.upscale);
}

v::ImageData targets(const v::ImageSetup& s) {
  const std::int64_t size = s.pipeline.image_size;
  return {.dataset = "bsds500-small",
          .synthetic = [&o = s.options, size,
                        device = s.ctx.device] { return v::uniform_images(o.batch_size, size, 0, 1, device); },
          .transform =
              [size](pipeline::LoaderConfig& config) {
                // A random crop of side `size` (no rescaling) of a 481x321 image: the
                // RandomResizedCrop box with a fixed area share and ratio 1.
                const double share = std::min(1.0, static_cast<double>(size * size) / (481.0 * 321.0));
                config.transform.crop = {share, share, 1.0, 1.0};
                config.transform.normalize = {{0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};  // [0, 1]
              }};
}

v::ImageModel espcn(const ResoOptions& opt, const v::ImageSetup& s) {
  const std::int64_t size = s.pipeline.image_size, upscale = opt.upscale;
  v::Espcn model(upscale);
  model->to(s.ctx.device);
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(opt.lr));
  return {[=](const v::DeviceBatch& b) mutable {
            auto target = v::rgb_to_y(b.images);
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
          }};
}

}  // namespace

int main(int argc, char** argv) {
  ResoOptions opt;
  return v::run_image_benchmark(
      argc, argv, MLBENCH_SOURCE_HASH,
      {.name = "reso",
       .description = "reso: ESPCN super-resolution on the Y channel (Adam, MSE)",
       .defaults = {.batch_size = 64, .repeat = 25, .number = 5, .workers = 4},
       .image_size = 256,
       .add_flags = [&](core::BenchCli& cli) { add_flags(cli, opt); },
       .check_image_size = [&](const pipeline::PipelineOptions& p) { return image_size_error(opt, p); },
       .data = targets,
       .model = [&](const v::ImageSetup& s) { return espcn(opt, s); }});
}
