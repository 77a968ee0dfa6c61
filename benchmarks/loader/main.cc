// loader: the data pipeline alone, as the Mila `loader` benchmark but honest
// about what it times. Iterates ImageFolder JPEGs (or tar shards: --data
// DIR/*.tar, pipeline/shards.h) through RandomResizedCrop,
// flip, normalize and batching, copies each batch to the device when there is
// one, and reports images/s with the full `stall` and `pipeline` blocks.
// Worker start-up happens before the timed loop; the report's
// pipeline.epochs table separates the first (cold) epoch from later (warm) ones.
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "benchmarks/support/device_copy.h"
#include "benchmarks/support/torch_runtime.h"
#include "core/process.h"
#include "pipeline/http_source.h"
#include "pipeline/options.h"
#include "pipeline/torch_adapter.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

struct EpochTally {
  long batches = 0;
  long images = 0;
  double seconds = 0;
  double wait_s = 0;
  double cpu_s = 0;  // this process's CPU (every thread, user + system) while the epoch's batches were consumed
};

// What the consumer saw, by epoch, and the consumer's track of --trace.
struct ConsumerLog {
  std::map<long, EpochTally> tallies;
  long last_epoch = 0;
  int last_size = 0;
  double last_cpu = core::process_cpu_now().total();
  std::shared_ptr<pipeline::TraceRecorder> trace;
  pipeline::TraceRecorder::Track* consumer = nullptr;

  // After each iteration: its batch into its epoch's tally, its phases onto the trace.
  void record(const core::Iteration& it) {
    EpochTally& t = tallies[last_epoch];
    ++t.batches;
    t.images += last_size;
    t.seconds += it.wait_s() + it.h2d_s() + it.compute_s();
    t.wait_s += it.wait_s();
    const double cpu_now = core::process_cpu_now().total();
    t.cpu_s += cpu_now - last_cpu;
    last_cpu = cpu_now;
    if (consumer) {
      const double t0 = trace->to_us(it.start());
      consumer->span_us("wait", t0, it.wait_s() * 1e6);
      consumer->span_us("h2d", t0 + it.wait_s() * 1e6, it.h2d_s() * 1e6);
      consumer->span_us("compute", t0 + (it.wait_s() + it.h2d_s()) * 1e6, it.compute_s() * 1e6);
    }
  }
  // pipeline.epochs: one row per epoch.
  nlohmann::json epochs() const {
    nlohmann::json per_epoch = nlohmann::json::array();
    for (const auto& [epoch, t] : tallies) {
      per_epoch.push_back({{"epoch", epoch},
                           {"batches", t.batches},
                           {"images", t.images},
                           {"seconds", t.seconds},
                           {"images_per_s", t.seconds > 0 ? t.images / t.seconds : 0.0},
                           {"wait_s", t.wait_s},
                           {"cpu_s", t.cpu_s},
                           {"cpu_us_per_image", t.images > 0 ? 1e6 * t.cpu_s / t.images : 0.0}});
    }
    return per_epoch;
  }
};

// Everything loader's own flags set.
struct LoaderOptions {
  pipeline::PipelineOptions pipeline;
  long epochs = 0;
};

void add_flags(core::BenchCli& cli, LoaderOptions& opt) {
  pipeline::add_pipeline_flags(cli, opt.pipeline);
  cli.add_option("--epochs", opt.epochs,
                 "Run this many whole epochs (sets --repeat to cover them; 0: --repeat x --number batches)",
                 core::ArgKind::Runtime)
      ->check(core::integer_at_least(0))
      ->excludes("--min-time");  // it sizes --repeat from --number, which --min-time only knows later
}

// The dataset, scanned before the run so that --epochs can size --repeat (which it sets
// here). When it cannot be read: why, in one line (run() makes it a FAIL report and exit 2).
std::optional<std::string> open_source(core::BenchOptions& o, const LoaderOptions& opt,
                                       std::shared_ptr<pipeline::ItemSource>& source) {
  const std::string dataset = "fake-imagenet-small";
  const std::string data =
      o.data.empty() ? (std::filesystem::path(o.data_directory) / dataset / "train").string() : o.data;
  const pipeline::PipelineOptions& popts = opt.pipeline;
  try {
    source = pipeline::open_image_source(data, pipeline::datagen_hint(o, dataset), popts);
  } catch (const pipeline::DataError& e) {
    return e.what();
  } catch (const pipeline::SourceUnavailable& e) {
    return e.what();
  }
  const auto folder = std::dynamic_pointer_cast<pipeline::ImageFolderReader>(source);
  for (const auto& c : folder ? folder->empty_classes() : std::vector<std::string>{}) {
    if (popts.strict_data) {
      return "class folder " + (std::filesystem::path(data) / c).string() + " is empty (--strict-data)";
    }
    std::cerr << "warning: class folder " << (std::filesystem::path(data) / c).string()
              << " is empty (its label has no samples)\n";
  }
  if (opt.epochs > 0) {
    const std::size_t n = source->size();
    const long bpe = static_cast<long>(popts.keep_last ? (n + o.batch_size - 1) / o.batch_size : n / o.batch_size);
    o.repeat = static_cast<int>(std::max(1L, (opt.epochs * bpe + o.number - 1) / o.number));
    if (o.warmup >= o.repeat) o.warmup = 0;
  }
  return std::nullopt;
}

// The pipeline over `source` with the shared flags' config, its workers started.
std::shared_ptr<pipeline::Loader> start_loader(const core::BenchOptions& o, const LoaderOptions& opt,
                                               const bench::TorchContext& ctx,
                                               std::shared_ptr<pipeline::ItemSource> source,
                                               pipeline::TraceRecorder* trace) {
  pipeline::LoaderConfig config = pipeline::benchmark_loader_config(o, opt.pipeline);
  if (config.transform.decode_on_device) {
    throw core::UsageError(
        "--decode gpu is for the image benchmarks (convnet, convnet_fp16, ...); the loader "
        "benchmark decodes on the CPU");
  }
  if (ctx.device.is_cuda()) config.allocator = pipeline::torch_host_allocator();
  config.trace = trace;
  auto loader = std::make_shared<pipeline::Loader>(source, config);
  loader->start();  // worker start-up outside the timed loop
  return loader;
}

core::Workload make_workload(const core::BenchOptions& o, const LoaderOptions& opt, const bench::TorchContext& ctx,
                             std::shared_ptr<pipeline::ItemSource> source,
                             std::shared_ptr<pipeline::TraceRecorder> trace) {
  auto loader = start_loader(o, opt, ctx, source, trace.get());
  const bool cuda = ctx.device.is_cuda();
  auto log = std::make_shared<ConsumerLog>();
  log->trace = trace;
  log->consumer = trace ? &trace->add_track("consumer") : nullptr;

  core::Workload work;
  work.items_per_iteration = o.batch_size;
  // Non-blocking copies on a side stream; keeps each batch's pinned buffer until its copy is done.
  auto copier = std::make_shared<bench::DeviceCopier>(ctx.device);
  work.step = [=](core::Iteration& it) {
    auto batch = it.wait([&] {
      copier->release_finished();
      return loader->next();
    });
    if (!batch) throw std::runtime_error("the pipeline ended before the loop (--epochs too small?)");
    log->last_epoch = batch->epoch;
    log->last_size = batch->size;
    auto tensors = pipeline::to_tensors(*batch);
    if (cuda) {
      auto on_device = it.h2d([&] { return copier->copy({tensors.data, tensors.labels}); });
      // Touch the batch on the device so the copy is real work the stage waits for.
      it.compute([&] { return on_device[0].sum(); });
    }
  };
  work.on_iteration = [log](long, const core::Iteration& it) { log->record(it); };
  work.finish = [=, trace_file = o.trace](nlohmann::json& report) {
    nlohmann::json p = loader->to_json();
    p["epochs"] = log->epochs();
    report["pipeline"] = p;
    loader->stop();
    if (trace) {
      trace->write(trace_file);
      std::cout << "Trace: " << trace_file << "\n";
    }
  };
  return work;
}

int run(core::BenchCli& cli, const LoaderOptions& opt) {
  std::shared_ptr<pipeline::ItemSource> source;
  std::optional<std::string> unreadable;
  if (!cli.options().synthetic) unreadable = open_source(cli.options(), opt, source);
  std::shared_ptr<pipeline::TraceRecorder> trace;
  if (!cli.options().trace.empty()) trace = std::make_shared<pipeline::TraceRecorder>();

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    // A dataset that cannot be read: exit 2 and a FAIL report with the reason.
    if (unreadable) throw core::InputError(*unreadable);
    return make_workload(cli.options(), opt, ctx, source, trace);
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("loader", "loader: the instrumented data pipeline alone (decode, augment, batch, copy)",
                     {.batch_size = 256, .repeat = 15, .number = 5, .workers = 8});
  LoaderOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
