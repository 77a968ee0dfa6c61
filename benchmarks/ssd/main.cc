// ssd: SSD300 with a ResNet-34 backbone (MLPerf's SSD layout, Mila's ssd),
// multibox loss, SGD. Images and boxes come from a COCO-style dataset
// (<data>/train2017/*.jpg + <data>/annotations/instances_train2017.json; the
// coco-shapes recipe makes one of shapes with known boxes) through the
// instrumented pipeline: Resize(300) + CenterCrop(300) of each image, its
// boxes mapped into the crop, matched to the 8732 default boxes and encoded
// on the CPU in the consumer (so that work counts as wait, as a loader's would).
#include <torch/torch.h>

#include <filesystem>

#include "benchmarks/models/ssd_box.h"
#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_benchmark.h"
#include "pipeline/formats/coco_annotations.h"
#include "pipeline/transforms.h"
#include "source_hash.h"

namespace {

using namespace mlbench;
namespace v = bench::vision;

// Box targets of one image: its boxes (relative to the crop) encoded.
v::BoxTargets targets_of(const std::vector<pipeline::RelBox>& boxes, const v::BoxEncoder& encoder) {
  std::vector<float> ltrb;
  std::vector<std::int64_t> labels;
  for (const auto& b : boxes) {
    ltrb.insert(ltrb.end(), {b.l, b.t, b.r, b.b});
    labels.push_back(b.label);
  }
  const auto g = static_cast<std::int64_t>(labels.size());
  return encoder.encode(torch::from_blob(ltrb.data(), {g, 4}, torch::kFloat32).clone(),
                        torch::from_blob(labels.data(), {g}, torch::kInt64).clone());
}

// The COCO-style dataset at `root` (annotations: --annotations, else
// <root>/annotations/instances_train2017.json) with, per batch, each image's
// boxes mapped into its Resize(300) + CenterCrop(300) and encoded.
v::PipelineSource open_coco(const core::BenchOptions& o, const pipeline::PipelineOptions& popts,
                            const std::filesystem::path& root, const std::string& annotations, std::int64_t classes,
                            std::shared_ptr<const v::BoxEncoder> encoder) {
  const std::filesystem::path ann =
      annotations.empty() ? root / "annotations" / "instances_train2017.json" : std::filesystem::path(annotations);
  std::shared_ptr<pipeline::CocoImageSource> source;
  if (popts.drop_after_read || popts.hold_page_cache) {
    throw core::UsageError(std::string(popts.drop_after_read ? "--drop-after-read" : "--hold-page-cache") +
                           " is not supported by the COCO reader of ssd");
  }
  try {
    if (!std::filesystem::exists(ann)) {
      throw pipeline::DataError("annotations " + ann.string() + " not found; " +
                                pipeline::datagen_hint(o, "coco-shapes-small") + " (or pass --data/--annotations)");
    }
    source = std::make_shared<pipeline::CocoImageSource>(root / "train2017", pipeline::read_coco_annotations(ann));
  } catch (const pipeline::DataError& e) {
    throw core::UsageError(e.what());
  }
  const auto categories = static_cast<std::int64_t>(source->annotations().category_ids.size());
  if (categories + 1 > classes) {
    throw core::UsageError(ann.string() + " has " + std::to_string(categories) +
                           " categories; --classes must be at least " + std::to_string(categories + 1));
  }
  auto prepare = [source, encoder](const pipeline::Batch&, const torch::Tensor& indices) {
    std::vector<torch::Tensor> offsets, labels;
    const auto* idx = indices.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < indices.size(0); ++i) {
      const pipeline::CocoImage& im = source->annotations().images[static_cast<std::size_t>(idx[i])];
      const pipeline::CropBox c = pipeline::center_crop_box(im.width, im.height, 300, 300);
      auto t = targets_of(pipeline::boxes_in_crop(im, c.x, c.y, c.w, c.h), *encoder);
      offsets.push_back(t.offsets);
      labels.push_back(t.labels);
    }
    return std::vector<torch::Tensor>{torch::stack(offsets), torch::stack(labels)};
  };
  return {source, prepare};
}

struct SsdOptions {
  std::int64_t classes = 81;
  std::string annotations;
  double lr = 2.5e-3, momentum = 0.9, weight_decay = 5e-4;
};

void add_flags(core::BenchCli& cli, SsdOptions& opt) {
  cli.add_option("--classes", opt.classes, "Classes including background (COCO: 81)")->check(core::integer_at_least(2));
  cli.add_option("--annotations", opt.annotations,
                 "COCO-style annotation file (default: <data>/annotations/instances_train2017.json)");
  cli.add_option("--lr", opt.lr, "SGD learning rate")->check(core::number_above(0));
  cli.add_option("--momentum", opt.momentum, "SGD momentum")->check(core::number_in(0.0, 1.0));
  cli.add_option("--weight-decay", opt.weight_decay, "SGD weight decay")->check(core::number_in(0));
}

std::string image_size_error(const pipeline::PipelineOptions& p) {
  if (p.image_size == 300) return "";
  return "--image-size must be 300 (SSD300's default boxes are laid out for 300x300), got " +
         std::to_string(p.image_size);
}

// One batch of random images, each with 1-4 random boxes, encoded once.
v::DeviceBatch synthetic_boxes(const core::BenchOptions& o, std::int64_t classes, const v::BoxEncoder& encoder,
                               const torch::Device& device) {
  auto b = v::synthetic_batch(o.batch_size, 300, classes, device);
  std::vector<torch::Tensor> offsets, labels;
  for (int i = 0; i < o.batch_size; ++i) {
    const auto g = torch::randint(1, 5, {1}).item<std::int64_t>();
    auto lt = torch::rand({g, 2}) * 0.7;
    auto ltrb = torch::cat({lt, lt + 0.1 + torch::rand({g, 2}) * 0.2}, 1);
    auto t = encoder.encode(ltrb, torch::randint(1, classes, {g}, torch::kInt64));
    offsets.push_back(t.offsets);
    labels.push_back(t.labels);
  }
  b.extra = {torch::stack(offsets).to(device), torch::stack(labels).to(device)};
  return b;
}

v::ImageData coco(const SsdOptions& opt, std::shared_ptr<const v::BoxEncoder> encoder, const v::ImageSetup& s) {
  return {.dataset = "coco-shapes-small",
          .subdir = "",
          .synthetic = [&o = s.options, &opt, encoder,
                        device = s.ctx.device] { return synthetic_boxes(o, opt.classes, *encoder, device); },
          .transform =
              [](pipeline::LoaderConfig& config) {
                config.transform.mode = pipeline::TransformMode::Eval;  // Resize(300) + CenterCrop(300), no flip
                config.transform.resize_size = 300;
              },
          .open =
              [&o = s.options, &popts = s.pipeline, &opt, encoder](const std::string& path) {
                return open_coco(o, popts, path, opt.annotations, opt.classes, encoder);
              }};
}

v::ImageModel ssd300(const SsdOptions& opt, std::shared_ptr<const v::BoxEncoder> encoder, const v::ImageSetup& s) {
  v::Ssd300 model(opt.classes);
  model->to(s.ctx.device);
  auto optimizer = std::make_shared<torch::optim::SGD>(
      model->parameters(), torch::optim::SGDOptions(opt.lr).momentum(opt.momentum).weight_decay(opt.weight_decay));
  return {[=](const v::DeviceBatch& b) mutable {
            optimizer->zero_grad();
            auto [ploc, pconf] = model->forward(b.images);
            auto l = v::multibox_loss(ploc, pconf, b.extra[0], b.extra[1]);
            l.backward();
            optimizer->step();
            return l.detach();
          },
          [=](nlohmann::json& m) {
            m["parameters"] = bench::parameter_count(*model);
            m["default_boxes"] = encoder->defaults().size(0);
            m["backbone"] = "resnet34 (layer3 stride 1)";
          }};
}

}  // namespace

int main(int argc, char** argv) {
  SsdOptions opt;
  // The default boxes' encoder, made before the stream: the data's box targets and the report use it.
  std::shared_ptr<const v::BoxEncoder> encoder;
  return v::run_image_benchmark(argc, argv, MLBENCH_SOURCE_HASH,
                                {.name = "ssd",
                                 .description = "ssd: SSD300 / ResNet-34 object detection (multibox loss, SGD)",
                                 .defaults = {.batch_size = 128, .repeat = 15, .number = 5, .workers = 4},
                                 .image_size = 300,
                                 .add_flags = [&](core::BenchCli& cli) { add_flags(cli, opt); },
                                 .check_image_size = image_size_error,
                                 .data =
                                     [&](const v::ImageSetup& s) {
                                       encoder = std::make_shared<v::BoxEncoder>(v::ssd300_default_boxes());
                                       return coco(opt, encoder, s);
                                     },
                                 .model = [&](const v::ImageSetup& s) { return ssd300(opt, encoder, s); }});
}
