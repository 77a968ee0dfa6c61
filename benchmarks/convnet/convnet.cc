// The convnet program: ResNet (--arch) trained with SGD (momentum 0.9,
// weight decay 1e-4) and cross-entropy on ImageFolder images read through the
// instrumented pipeline (RandomResizedCrop --image-size + flip), or on one
// synthetic batch made once on the device.
//
// Mixed precision (--half, always on in convnet_fp16) as bench::MixedPrecision
// runs it: on CUDA, fp16 autocast with dynamic loss scaling; on the CPU,
// bfloat16 autocast.
#include "benchmarks/convnet/convnet.h"

#include <memory>

#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/mixed_precision.h"
#include "benchmarks/support/torch_runtime.h"

namespace mlbench::bench {

int convnet_main(int argc, char** argv, const ProgramVariant& variant) {
  using namespace mlbench;
  const std::string bench_name = variant.name;
  const bool half = variant.mixed_precision;
  core::BenchCli cli(
      bench_name,
      bench_name + ": ResNet image classification (SGD, cross-entropy)" + (half ? " in mixed precision" : ""),
      {.batch_size = half ? 128 : 64, .repeat = 15, .number = 5, .workers = 4});
  pipeline::PipelineOptions popts;
  pipeline::add_pipeline_flags(cli, popts);
  std::string arch = "resnet101";
  std::int64_t classes = 1000;
  double lr = 0.1, momentum = 0.9, weight_decay = 1e-4;
  bool use_half = half;
  cli.add_option("--arch", arch, "Model: resnet18, resnet34, resnet50, resnet101 or resnet152")
      ->check(CLI::IsMember(vision::resnet_archs()));
  cli.add_option("--classes", classes, "Output classes (at least the dataset's class count)")
      ->check(core::integer_at_least(2));
  cli.add_option("--lr", lr, "SGD learning rate")->check(core::number_above(0));
  cli.add_option("--momentum", momentum, "SGD momentum")->check(core::number_in(0.0, 1.0));
  cli.add_option("--weight-decay", weight_decay, "SGD weight decay")->check(core::number_in(0));
  add_precision_flag(cli, variant, use_half);
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return run_benchmark(cli, variant.source_hash, [&](const TorchContext& ctx) {
    const core::BenchOptions& o = cli.options();
    auto stream = vision::make_image_stream(
        o, popts, ctx.device,
        {.dataset = "fake-imagenet-small",
         .synthetic = [&] { return vision::synthetic_batch(o.batch_size, popts.image_size, classes, ctx.device); },
         .open =
             [&](const std::string& path) {
               auto source = vision::open_image_source(o, path, "fake-imagenet-small", popts);
               const std::size_t found = source->class_count();  // folders, the listing's classes, or shards' labels
               if (static_cast<std::int64_t>(found) > classes) {
                 throw core::UsageError(path + " has " + std::to_string(found) + " classes, more than --classes " +
                                        std::to_string(classes));
               }
               return vision::PipelineSource{source, {}};
             }});
    auto model = std::make_shared<vision::ResNet>(vision::resnet_spec(arch), classes);
    (*model)->to(ctx.device);
    (*model)->train();
    const auto params = (*model)->parameters();
    auto optimizer = std::make_shared<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
    auto precision = std::make_shared<MixedPrecision>(use_half, ctx.device);

    return vision::image_workload(
        o, popts, stream,
        [=](const vision::DeviceBatch& b) {
          optimizer->zero_grad();
          torch::Tensor l;
          {
            auto scope = precision->autocast();
            l = torch::cross_entropy_loss((*model)->forward(b.images), b.labels);
          }
          if (precision->backward(l, params)) optimizer->step();
          return l;
        },
        [=, arch = arch](nlohmann::json& m) {
          m["arch"] = arch;
          m["parameters"] = parameter_count(**model);
          precision->report(m);
        });
  });
}

}  // namespace mlbench::bench
