// fast_style: fast neural style transfer (PyTorch examples/fast_neural_style,
// Mila's fast_style): TransformerNet trained with Adam on a perceptual loss
// from a frozen VGG16 (content: relu2_2; style: Gram matrices of relu1_2,
// relu2_2, relu3_3, relu4_3). Content images: ImageFolder JPEGs resized and
// centre-cropped to --image-size through the instrumented pipeline. The style
// image is generated (a fixed seeded pattern) since no file is downloaded.
#include <torch/torch.h>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_benchmark.h"
#include "source_hash.h"

namespace {

using namespace mlbench;
namespace v = bench::vision;

// A style image, deterministic for --seed, [1, 3, size, size] in 0..255: stripes and blobs
// at a few scales, so its Gram matrices are far from a photo's.
torch::Tensor make_style_image(std::int64_t size) {
  auto y = torch::linspace(0, 1, size).view({1, 1, size, 1}).expand({1, 3, size, size});
  auto x = torch::linspace(0, 1, size).view({1, 1, 1, size}).expand({1, 3, size, size});
  auto freq = torch::tensor({7.0f, 13.0f, 23.0f}).view({1, 3, 1, 1});
  auto base = torch::sin((x * 3 + y * 2) * freq) * 0.5 + 0.5;
  auto noise = torch::rand({1, 3, (size + 7) / 8, (size + 7) / 8});
  noise = torch::upsample_nearest2d(noise, {size, size});
  return ((base * 0.7 + noise * 0.3) * 255).contiguous();
}

// The example's normalize_batch: 0..255 -> ImageNet-normalised VGG input.
torch::Tensor vgg_input(const torch::Tensor& x) {
  auto mean = torch::tensor({0.485f, 0.456f, 0.406f}, x.options()).view({1, 3, 1, 1});
  auto std = torch::tensor({0.229f, 0.224f, 0.225f}, x.options()).view({1, 3, 1, 1});
  return (x / 255.0 - mean) / std;
}

struct FastStyleOptions {
  double lr = 1e-3, content_weight = 1e5, style_weight = 1e10;
};

void add_flags(core::BenchCli& cli, FastStyleOptions& opt) {
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--content-weight", opt.content_weight, "Weight of the content loss")->check(core::number_in(0));
  cli.add_option("--style-weight", opt.style_weight, "Weight of the style loss")->check(core::number_in(0));
}

std::string image_size_error(const pipeline::PipelineOptions& p) {
  if (p.image_size % 4 == 0) return "";
  return "--image-size must be a multiple of 4 (two stride-2 stages), got " + std::to_string(p.image_size);
}

v::ImageData content_images(const v::ImageSetup& s) {
  const std::int64_t size = s.pipeline.image_size;
  return {.dataset = "fake-imagenet-small",
          .synthetic = [&o = s.options, size,
                        device = s.ctx.device] { return v::uniform_images(o.batch_size, size, 0, 255, device); },
          // The example's transform: Resize(size), CenterCrop(size), ToTensor, x 255.
          .transform =
              [size](pipeline::LoaderConfig& config) {
                config.transform.mode = pipeline::TransformMode::Eval;
                config.transform.resize_size = static_cast<int>(size);
                config.transform.normalize = {{0.0f, 0.0f, 0.0f}, {1 / 255.0f, 1 / 255.0f, 1 / 255.0f}};
              }};
}

v::ImageModel style_model(const FastStyleOptions& opt, const v::ImageSetup& s) {
  const std::int64_t size = s.pipeline.image_size;
  const torch::Device device = s.ctx.device;
  v::TransformerNet transformer;
  v::Vgg16Features vgg;
  transformer->to(device);
  vgg->to(device);
  vgg->eval();
  std::vector<torch::Tensor> gram_style;
  {
    torch::NoGradGuard no_grad;
    for (const auto& f : vgg->forward(vgg_input(make_style_image(size).to(device)))) {
      gram_style.push_back(v::gram_matrix(f));
    }
  }
  auto optimizer = std::make_shared<torch::optim::Adam>(transformer->parameters(), torch::optim::AdamOptions(opt.lr));
  const double content_weight = opt.content_weight, style_weight = opt.style_weight;
  return {[=](const v::DeviceBatch& b) mutable {
            optimizer->zero_grad();
            const auto n = b.images.size(0);
            auto y = transformer->forward(b.images);
            auto fy = vgg->forward(vgg_input(y));
            std::vector<torch::Tensor> fx;
            {
              torch::NoGradGuard no_grad;  // the content target needs no graph
              fx = vgg->forward(vgg_input(b.images));
            }
            auto content = content_weight * torch::mse_loss(fy[1], fx[1]);
            auto style = torch::zeros({}, y.options());
            for (std::size_t i = 0; i < fy.size(); ++i) {
              style = style + torch::mse_loss(v::gram_matrix(fy[i]), gram_style[i].expand({n, -1, -1}));
            }
            auto total = content + style_weight * style;
            total.backward();
            optimizer->step();
            return total.detach();
          },
          [=](nlohmann::json& m) {
            m["parameters_transformer"] = bench::parameter_count(*transformer);
            m["parameters_vgg_frozen"] = bench::parameter_count(*vgg);
            m["style_image"] = "generated (seeded pattern)";
          }};
}

}  // namespace

int main(int argc, char** argv) {
  FastStyleOptions opt;
  return v::run_image_benchmark(argc, argv, MLBENCH_SOURCE_HASH,
                                {.name = "fast_style",
                                 .description = "fast_style: TransformerNet with a frozen-VGG16 perceptual loss (Adam)",
                                 .defaults = {.batch_size = 128, .repeat = 25, .number = 5, .workers = 4},
                                 .image_size = 64,
                                 .add_flags = [&](core::BenchCli& cli) { add_flags(cli, opt); },
                                 .check_image_size = image_size_error,
                                 .data = content_images,
                                 .model = [&](const v::ImageSetup& s) { return style_model(opt, s); }});
}
