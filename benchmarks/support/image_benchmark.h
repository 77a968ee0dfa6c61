// The skeleton of an image benchmark whose model trains on the image stream's
// batches (dcgan, fast_style, reso, ssd): a command with the pipeline flags
// (its own --image-size default) and the benchmark's flags; after parsing, a
// check of --image-size against the networks; then run_benchmark over the
// image stream (make_image_stream) and its workload (image_workload). The
// benchmark names its data, its model and its step; the skeleton does the rest.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/torch_runtime.h"
#include "core/cli.h"
#include "pipeline/options.h"

namespace mlbench::bench::vision {

// What the set-up is given: the parsed flags and the device.
struct ImageSetup {
  const core::BenchOptions& options;
  const pipeline::PipelineOptions& pipeline;
  const TorchContext& ctx;
};

// The model side of the workload, built after the stream: its training step
// (its loss read at the end of the observation) and its report["metrics"].
struct ImageModel {
  TrainStep step;
  std::function<void(nlohmann::json& metrics)> metrics;
};

struct ImageBenchmark {
  std::string name;  // the command's, and its errors' "<name>: error: "
  std::string description;
  core::BenchDefaults defaults;
  int image_size = 224;  // --image-size's default
  // The benchmark's own flags, after the pipeline's.
  std::function<void(core::BenchCli&)> add_flags{};
  // After parsing: why --image-size (or the flags it must fit) cannot run, or
  // "" when it can. A reason ends the program with exit code 2.
  std::function<std::string(const pipeline::PipelineOptions&)> check_image_size{};
  // What the stream reads; called before `model`.
  std::function<ImageData(const ImageSetup&)> data;
  std::function<ImageModel(const ImageSetup&)> model;
};

// main() of such a benchmark: builds and parses the command, checks
// --image-size, then runs the benchmark. Returns the exit code.
int run_image_benchmark(int argc, char** argv, const char* source_hash, const ImageBenchmark& spec);

}  // namespace mlbench::bench::vision
