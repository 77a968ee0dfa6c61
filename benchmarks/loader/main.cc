// loader: the data pipeline alone, as the Mila `loader` benchmark but honest
// about what it times. Iterates ImageFolder JPEGs through RandomResizedCrop,
// flip, normalize and batching, copies each batch to the device when there is
// one, and reports images/s with the full `stall` and `pipeline` blocks.
// Worker start-up happens before the timed loop; the report's
// pipeline.epochs table separates the first (cold) epoch from later (warm) ones.
#include <cmath>
#include <filesystem>

#include <torch/torch.h>

#include "benchmarks/support/device_copy.h"
#include "benchmarks/support/torch_runtime.h"
#include "core/process.h"
#include "pipeline/options.h"
#include "pipeline/torch_adapter.h"
#include "source_hash.h"

namespace {

struct EpochTally {
  long batches = 0;
  long images = 0;
  double seconds = 0;
  double wait_s = 0;
  double cpu_s = 0;  // this process's CPU (every thread, user + system) while the epoch's batches were consumed
};

}  // namespace

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("loader", "loader: the instrumented data pipeline alone (decode, augment, batch, copy)",
                     {.batch_size = 256, .repeat = 15, .number = 5, .workers = 8});
  pipeline::PipelineOptions popts;
  pipeline::add_pipeline_flags(cli, popts);
  long epochs = 0;
  cli.add_option("--epochs", epochs,
                 "Run this many whole epochs (sets --repeat to cover them; 0: --repeat x --number batches)",
                 core::ArgKind::Runtime)
      ->check(core::integer_at_least(0))
      ->excludes("--min-time");  // it sizes --repeat from --number, which --min-time only knows later
  if (auto rc = cli.parse(argc, argv)) return *rc;

  const core::BenchOptions& o = cli.options();
  const std::string dataset = "fake-imagenet-small";
  const std::string data =
      o.data.empty() ? (std::filesystem::path(o.data_directory) / dataset / "train").string() : o.data;

  // The dataset is scanned before the run so that --epochs can size --repeat.
  std::shared_ptr<pipeline::ImageFolderReader> source;
  if (!o.synthetic) {
    try {
      source = pipeline::open_image_folder(data, pipeline::datagen_hint(o, dataset), popts);
    } catch (const pipeline::DataError& e) {
      std::cerr << "loader: error: " << e.what() << "\n";
      return 2;
    }
    for (const auto& c : source->empty_classes()) {
      if (popts.strict_data) {
        std::cerr << "loader: error: class folder " << (std::filesystem::path(data) / c).string()
                  << " is empty (--strict-data)\n";
        return 2;
      }
      std::cerr << "warning: class folder " << (std::filesystem::path(data) / c).string()
                << " is empty (its label has no samples)\n";
    }
    if (epochs > 0) {
      const std::size_t n = source->size();
      const long bpe = static_cast<long>(popts.keep_last ? (n + o.batch_size - 1) / o.batch_size : n / o.batch_size);
      cli.options().repeat = static_cast<int>(std::max(1L, (epochs * bpe + o.number - 1) / o.number));
      if (cli.options().warmup >= cli.options().repeat) cli.options().warmup = 0;
    }
  }

  std::shared_ptr<pipeline::TraceRecorder> trace;
  if (!o.trace.empty()) trace = std::make_shared<pipeline::TraceRecorder>();

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    pipeline::LoaderConfig config;
    try {
      config = pipeline::make_loader_config(cli.options(), popts);
    } catch (const std::invalid_argument& e) {
      throw core::UsageError(e.what());
    }
    if (config.transform.decode_on_device) {
      throw core::UsageError("--decode gpu is for the image benchmarks (convnet, convnet_fp16, ...); the loader "
                             "benchmark decodes on the CPU");
    }
    const bool cuda = ctx.device.is_cuda();
    if (cuda) config.allocator = pipeline::torch_host_allocator();
    config.trace = trace.get();
    auto loader = std::make_shared<pipeline::Loader>(source, config);
    loader->start();  // worker start-up outside the timed loop
    auto tallies = std::make_shared<std::map<long, EpochTally>>();
    auto last_epoch = std::make_shared<long>(0);
    auto last_size = std::make_shared<int>(0);
    auto last_cpu = std::make_shared<double>(core::process_cpu_now().total());
    pipeline::TraceRecorder::Track* consumer = trace ? &trace->add_track("consumer") : nullptr;

    core::Workload work;
    work.items_per_iteration = cli.options().batch_size;
    // Non-blocking copies on a side stream; keeps each batch's pinned buffer until its copy is done.
    auto copier = std::make_shared<bench::DeviceCopier>(ctx.device);
    work.step = [=](core::Iteration& it) {
      auto batch = it.wait([&] {
        copier->release_finished();
        return loader->next();
      });
      if (!batch) throw std::runtime_error("the pipeline ended before the loop (--epochs too small?)");
      *last_epoch = batch->epoch;
      *last_size = batch->size;
      auto tensors = pipeline::to_tensors(*batch);
      if (cuda) {
        auto on_device = it.h2d([&] { return copier->copy({tensors.data, tensors.labels}); });
        // Touch the batch on the device so the copy is real work the stage waits for.
        it.compute([&] { return on_device[0].sum(); });
      }
    };
    work.on_iteration = [=](long, const core::Iteration& it) {
      EpochTally& t = (*tallies)[*last_epoch];
      ++t.batches;
      t.images += *last_size;
      t.seconds += it.wait_s() + it.h2d_s() + it.compute_s();
      t.wait_s += it.wait_s();
      const double cpu_now = core::process_cpu_now().total();
      t.cpu_s += cpu_now - *last_cpu;
      *last_cpu = cpu_now;
      if (consumer) {
        const double t0 = trace->to_us(it.start());
        consumer->span_us("wait", t0, it.wait_s() * 1e6);
        consumer->span_us("h2d", t0 + it.wait_s() * 1e6, it.h2d_s() * 1e6);
        consumer->span_us("compute", t0 + (it.wait_s() + it.h2d_s()) * 1e6, it.compute_s() * 1e6);
      }
    };
    work.finish = [=, trace_file = cli.options().trace](nlohmann::json& report) {
      nlohmann::json p = loader->to_json();
      nlohmann::json per_epoch = nlohmann::json::array();
      for (const auto& [epoch, t] : *tallies) {
        per_epoch.push_back({{"epoch", epoch},
                             {"batches", t.batches},
                             {"images", t.images},
                             {"seconds", t.seconds},
                             {"images_per_s", t.seconds > 0 ? t.images / t.seconds : 0.0},
                             {"wait_s", t.wait_s},
                             {"cpu_s", t.cpu_s},
                             {"cpu_us_per_image", t.images > 0 ? 1e6 * t.cpu_s / t.images : 0.0}});
      }
      p["epochs"] = per_epoch;
      report["pipeline"] = p;
      loader->stop();
      if (trace) {
        trace->write(trace_file);
        std::cout << "Trace: " << trace_file << "\n";
      }
    };
    return work;
  });
}
