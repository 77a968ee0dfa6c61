// The convnet program: ResNet (--arch) trained with SGD (momentum 0.9,
// weight decay 1e-4) and cross-entropy on ImageFolder images read through the
// instrumented pipeline (RandomResizedCrop --image-size + flip), or on one
// synthetic batch made once on the device.
//
// Mixed precision (--half, always on in convnet_fp16): on CUDA, fp16 autocast
// with dynamic loss scaling (GradScaler's policy, bench::LossScaler: scaled
// backward, unscale, skip the step and halve the scale on inf/NaN gradients);
// on the CPU, bfloat16 autocast (no scaling needed: bfloat16 has fp32's range).
#include "benchmarks/convnet/convnet.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <memory>

#include "benchmarks/common/autocast.h"
#include "benchmarks/common/image_bench.h"
#include "benchmarks/common/loss_scaler.h"
#include "benchmarks/common/torch_runtime.h"
#include "benchmarks/common/vision_models.h"

namespace mlbench::bench {

namespace {

// Unscales gradients in place; true when one of them is inf or NaN. One
// device-to-host read per step, as torch.cuda.amp.GradScaler.step does.
bool unscale_and_check(const std::vector<torch::Tensor>& params, double scale) {
  std::vector<torch::Tensor> bad;
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    g.mul_(1.0 / scale);
    bad.push_back(g.isfinite().logical_not().any());
  }
  if (bad.empty()) return false;
  return torch::stack(bad).any().item<bool>();
}

}  // namespace

int convnet_main(int argc, char** argv, const char* name, bool half, const char* source_hash) {
  using namespace mlbench;
  const std::string bench_name = name;
  core::BenchCli cli(bench_name,
                     bench_name + ": ResNet image classification (SGD, cross-entropy)" +
                         (half ? " in mixed precision" : ""),
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
  cli.add_option("--momentum", momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  cli.add_option("--weight-decay", weight_decay, "SGD weight decay")->check(CLI::NonNegativeNumber);
  if (!half) {
    cli.add_flag("--half", use_half,
                 "Mixed precision: CUDA fp16 autocast + loss scaling, CPU bfloat16 autocast");
  }
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return run_benchmark(cli, source_hash, [&](const TorchContext& ctx) {
    const core::BenchOptions& o = cli.options();
    const bool cuda = ctx.device.is_cuda();
    std::shared_ptr<vision::ImageStream> stream;
    if (o.synthetic) {
      stream = std::make_shared<vision::ImageStream>(
          vision::synthetic_batch(o.batch_size, popts.image_size, classes, ctx.device));
    } else {
      const std::string path = vision::default_data_path(o, "fake-imagenet-small", "train");
      auto source = vision::open_image_folder(o, path, "fake-imagenet-small", popts);
      const auto& folder = static_cast<const pipeline::ImageFolderReader&>(*source);
      if (static_cast<std::int64_t>(folder.classes().size()) > classes) {
        throw core::UsageError(path + " has " + std::to_string(folder.classes().size()) +
                               " classes, more than --classes " + std::to_string(classes));
      }
      stream = std::make_shared<vision::ImageStream>(source, vision::loader_config(o, popts, ctx.device), ctx.device);
    }
    auto model = std::make_shared<vision::ResNet>(vision::resnet_spec(arch), classes);
    (*model)->to(ctx.device);
    (*model)->train();
    const auto params = (*model)->parameters();
    auto optimizer = std::make_shared<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
    // Loss scaling only where it is needed: fp16 on CUDA.
    auto scaler = use_half && cuda ? std::make_shared<LossScaler>() : nullptr;

    core::Workload work;
    work.items_per_iteration = o.batch_size;
    work.step = [=](core::Iteration& it) {
      auto b = stream->next(it);
      if (popts.fetch_only) return;  // --fetch-only: the pipeline alone, no model step
      auto loss = it.compute([&] {
        optimizer->zero_grad();
        torch::Tensor l;
        {
          AutocastScope autocast(use_half, cuda);
          l = torch::cross_entropy_loss((*model)->forward(b.images), b.labels);
        }
        if (scaler) {
          (l * scaler->scale()).backward();
          if (scaler->update(unscale_and_check(params, scaler->scale()))) optimizer->step();
        } else {
          l.backward();
          optimizer->step();
        }
        return l;
      });
      it.set_loss(deferred_loss(loss));
    };
    work.finish = [=, arch = arch](nlohmann::json& report) {
      stream->finish(report);
      auto& m = report["metrics"];
      m["arch"] = arch;
      m["parameters"] = vision::parameter_count(**model);
      m["precision"] = !use_half ? "fp32" : (cuda ? "fp16-autocast" : "bf16-autocast");
      if (scaler) {
        m["loss_scale"] = scaler->scale();
        m["skipped_steps"] = scaler->skipped_steps();
      }
    };
    return work;
  });
}

}  // namespace mlbench::bench
