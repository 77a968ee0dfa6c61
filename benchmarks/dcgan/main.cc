// dcgan: the PyTorch DCGAN example at 64x64 (Mila's dcgan): generator and
// discriminator trained in turn with Adam (lr 2e-4, beta1 0.5) and binary
// cross-entropy, on ImageFolder images resized and centre-cropped to 64 and
// normalised to [-1, 1], read through the instrumented pipeline (or one
// synthetic batch made once on the device).
#include <torch/torch.h>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_benchmark.h"
#include "source_hash.h"

namespace {

using namespace mlbench;
namespace v = bench::vision;

struct DcganOptions {
  std::int64_t nz = 100, ngf = 64, ndf = 64;
  double lr = 0.0002, beta1 = 0.5;
};

void add_flags(core::BenchCli& cli, DcganOptions& opt) {
  cli.add_option("--nz", opt.nz, "Size of the latent vector z")->check(core::integer_at_least(1));
  cli.add_option("--ngf", opt.ngf, "Generator feature maps")->check(core::integer_at_least(1));
  cli.add_option("--ndf", opt.ndf, "Discriminator feature maps")->check(core::integer_at_least(1));
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--beta1", opt.beta1, "Adam beta1")->check(core::number_in(0.0, 1.0));
}

std::string image_size_error(const pipeline::PipelineOptions& p) {
  if (p.image_size == 64) return "";
  return "--image-size must be 64 (the networks are the 64x64 DCGAN), got " + std::to_string(p.image_size);
}

v::ImageData images(const v::ImageSetup& s) {
  return {.dataset = "fake-imagenet-small",
          .synthetic = [&o = s.options,
                        device = s.ctx.device] { return v::uniform_images(o.batch_size, 64, -1, 1, device); },
          // The example's transform: Resize(64), CenterCrop(64), Normalize(0.5, 0.5).
          .transform =
              [](pipeline::LoaderConfig& config) {
                config.transform.mode = pipeline::TransformMode::Eval;
                config.transform.resize_size = 64;
                config.transform.normalize = {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
              }};
}

v::ImageModel gan(const DcganOptions& opt, const v::ImageSetup& s) {
  v::DcganGenerator gen(opt.nz, opt.ngf, 3);
  v::DcganDiscriminator disc(opt.ndf, 3);
  gen->to(s.ctx.device);
  disc->to(s.ctx.device);
  auto adam = [&](const std::vector<torch::Tensor>& p) {
    return std::make_shared<torch::optim::Adam>(p, torch::optim::AdamOptions(opt.lr).betas({opt.beta1, 0.999}));
  };
  auto opt_g = adam(gen->parameters());
  auto opt_d = adam(disc->parameters());
  const auto dev = s.ctx.device;
  const std::int64_t nz = opt.nz;
  return {[=](const v::DeviceBatch& b) mutable {
            const auto n = b.images.size(0);
            auto real_label = torch::ones({n}, torch::TensorOptions().device(dev));
            auto fake_label = torch::zeros({n}, torch::TensorOptions().device(dev));
            // (1) Discriminator: maximise log(D(x)) + log(1 - D(G(z))).
            disc->zero_grad();
            auto err_real = torch::binary_cross_entropy(disc->forward(b.images), real_label);
            err_real.backward();
            auto fake = gen->forward(torch::randn({n, nz, 1, 1}, torch::TensorOptions().device(dev)));
            auto err_fake = torch::binary_cross_entropy(disc->forward(fake.detach()), fake_label);
            err_fake.backward();
            opt_d->step();
            // (2) Generator: maximise log(D(G(z))).
            gen->zero_grad();
            auto err_g = torch::binary_cross_entropy(disc->forward(fake), real_label);
            err_g.backward();
            opt_g->step();
            return (err_real + err_fake + err_g).detach();
          },
          [=](nlohmann::json& m) {
            m["parameters_generator"] = bench::parameter_count(*gen);
            m["parameters_discriminator"] = bench::parameter_count(*disc);
            m["loss"] = "errD_real + errD_fake + errG";
          }};
}

}  // namespace

int main(int argc, char** argv) {
  DcganOptions opt;
  return v::run_image_benchmark(argc, argv, MLBENCH_SOURCE_HASH,
                                {.name = "dcgan",
                                 .description = "dcgan: DCGAN 64x64 generator and discriminator (Adam, BCE)",
                                 .defaults = {.batch_size = 128, .repeat = 25, .number = 5, .workers = 4},
                                 .image_size = 64,
                                 .add_flags = [&](core::BenchCli& cli) { add_flags(cli, opt); },
                                 .check_image_size = image_size_error,
                                 .data = images,
                                 .model = [&](const v::ImageSetup& s) { return gan(opt, s); }});
}
