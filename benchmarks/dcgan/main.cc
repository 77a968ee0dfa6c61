// dcgan: the PyTorch DCGAN example at 64x64 (Mila's dcgan): generator and
// discriminator trained in turn with Adam (lr 2e-4, beta1 0.5) and binary
// cross-entropy, on ImageFolder images resized and centre-cropped to 64 and
// normalised to [-1, 1], read through the instrumented pipeline (or one
// synthetic batch made once on the device).
#include <torch/torch.h>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("dcgan", "dcgan: DCGAN 64x64 generator and discriminator (Adam, BCE)",
                     {.batch_size = 128, .repeat = 25, .number = 5, .workers = 4});
  pipeline::PipelineOptions popts;
  popts.image_size = 64;
  pipeline::add_pipeline_flags(cli, popts);
  std::int64_t nz = 100, ngf = 64, ndf = 64;
  double lr = 0.0002, beta1 = 0.5;
  cli.add_option("--nz", nz, "Size of the latent vector z")->check(core::integer_at_least(1));
  cli.add_option("--ngf", ngf, "Generator feature maps")->check(core::integer_at_least(1));
  cli.add_option("--ndf", ndf, "Discriminator feature maps")->check(core::integer_at_least(1));
  cli.add_option("--lr", lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--beta1", beta1, "Adam beta1")->check(core::number_in(0.0, 1.0));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (popts.image_size != 64) {
    std::cerr << "dcgan: error: --image-size must be 64 (the networks are the 64x64 DCGAN), got "
              << popts.image_size << "\n";
    return 2;
  }

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const core::BenchOptions& o = cli.options();
    auto stream = bench::vision::make_image_stream(
        o, popts, ctx.device,
        {.dataset = "fake-imagenet-small",
         .synthetic = [&] { return bench::vision::uniform_images(o.batch_size, 64, -1, 1, ctx.device); },
         // The example's transform: Resize(64), CenterCrop(64), Normalize(0.5, 0.5).
         .transform =
             [](pipeline::LoaderConfig& config) {
               config.transform.mode = pipeline::TransformMode::Eval;
               config.transform.resize_size = 64;
               config.transform.normalize = {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
             }});
    bench::vision::DcganGenerator gen(nz, ngf, 3);
    bench::vision::DcganDiscriminator disc(ndf, 3);
    gen->to(ctx.device);
    disc->to(ctx.device);
    auto adam = [&](const std::vector<torch::Tensor>& p) {
      return std::make_shared<torch::optim::Adam>(p, torch::optim::AdamOptions(lr).betas({beta1, 0.999}));
    };
    auto opt_g = adam(gen->parameters());
    auto opt_d = adam(disc->parameters());
    const auto dev = ctx.device;

    return bench::vision::image_workload(
        o, popts, stream,
        [=](const bench::vision::DeviceBatch& b) mutable {
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
        });
  });
}
