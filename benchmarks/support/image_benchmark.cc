#include "benchmarks/support/image_benchmark.h"

#include <iostream>

namespace mlbench::bench::vision {

int run_image_benchmark(int argc, char** argv, const char* source_hash, const ImageBenchmark& spec) {
  core::BenchCli cli(spec.name, spec.description, spec.defaults);
  pipeline::PipelineOptions popts;
  popts.image_size = spec.image_size;
  pipeline::add_pipeline_flags(cli, popts);
  if (spec.add_flags) spec.add_flags(cli);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (spec.check_image_size) {
    if (const std::string why = spec.check_image_size(popts); !why.empty()) {
      std::cerr << spec.name << ": error: " << why << "\n";
      return 2;
    }
  }

  return run_benchmark(cli, source_hash, [&](const TorchContext& ctx) {
    const core::BenchOptions& o = cli.options();
    const ImageSetup setup{o, popts, ctx};
    auto stream = make_image_stream(o, popts, ctx.device, spec.data(setup));
    ImageModel model = spec.model(setup);
    return image_workload(o, popts, std::move(stream), std::move(model.step), std::move(model.metrics));
  });
}

}  // namespace mlbench::bench::vision
