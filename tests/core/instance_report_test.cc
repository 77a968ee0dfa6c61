// The typed records every reader shares (core/instance_report.h, core/stall_record.h): every block
// read from a real-shaped report, absent blocks of older reports read as absent, and a bad field is
// one error naming the file and the field.
#include "core/instance_report.h"
#include "core/stall_record.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace mlbench::core {
namespace {

nlohmann::json full_report() {
  return nlohmann::json::parse(R"({
    "schema_version": 1, "name": "loader", "suite": "fast", "run_id": 2, "jr_id": 1, "batch_size": 64,
    "workers": 2, "cpu_cores": 2, "number": 3, "completed": true, "device": "cpu", "gpu": null,
    "batch_loss": [0.5, null], "metrics": {"allreduce_exposed_s": 0.25},
    "train": {"avg": 0.1, "min": 0.09, "max": 0.11, "sd": 0.01, "count": 3, "unit": "s"},
    "train_item": {"avg": 1920.0, "min": 1745.0, "max": 2133.0, "range": 388.0, "unit": "items/sec"},
    "stall": {"wait": {"avg": 0.02, "min": 0.0, "max": 0.05, "sd": 0.01, "count": 9, "unit": "s"},
              "h2d": null, "compute": {"avg": 0.01, "min": null, "max": null, "sd": null, "count": 0},
              "iteration": {"avg": 0.03, "min": 0.02, "max": 0.06, "sd": 0.01, "count": 9}, "stall_pct": 66.7,
              "warmup_iterations": 9, "phase_clock": "host"},
    "machine": {"hostname": "vm", "cpu_model": "AMD EPYC", "logical_cores": 2, "gpus": [],
                "blas": {"name": "openblas-openmp", "threads": 2}},
    "pipeline": {"source": "image-folder", "workers": 2, "prefetch": 4, "io_depth": 8, "image_size": 224,
                 "output": "float32", "root": "/data", "partitioned_cache": null, "cache": {"items": 500},
                 "read_ahead": {"window_per_worker": 4}, "epochs": [{"images": 2000}, {"images": 1000}],
                 "stages": {"decode": {"busy_s": 1.5, "items": 2000, "per_item_ms": 0.75}}},
    "runner": {"job": "loader", "slot": 1, "point": 0, "exit_code": 0, "signal": null},
    "stability": {"observations": 3, "median_s": 0.1, "max_s": 0.11, "short_observations": true}
  })");
}

TEST(InstanceReport, EveryBlockReadsTyped) {
  const InstanceReport r = parse_instance_report(full_report());
  EXPECT_EQ(r.schema_version, 1);
  EXPECT_EQ(r.name, "loader");
  EXPECT_EQ(r.jr_id, 1);
  ASSERT_TRUE(r.train_item && r.train_item->avg);
  EXPECT_DOUBLE_EQ(*r.train_item->avg, 1920.0);
  ASSERT_EQ(r.batch_loss.size(), 2u);
  EXPECT_FALSE(r.batch_loss[1]) << "a non-finite loss is written as null";
  EXPECT_DOUBLE_EQ(r.metric("allreduce_exposed_s").value_or(0), 0.25);
  ASSERT_TRUE(r.stall && r.stall->wait && r.stall->compute);
  EXPECT_FALSE(r.stall->h2d) << "a null block is absent";
  EXPECT_FALSE(r.stall->compute->min) << "a null figure is absent";
  EXPECT_DOUBLE_EQ(r.stall->stall_pct.value_or(0), 66.7);
  ASSERT_TRUE(r.machine && r.machine->blas);
  EXPECT_EQ(r.machine->blas->name, "openblas-openmp");
  ASSERT_TRUE(r.pipeline);
  EXPECT_EQ(r.pipeline->io_depth, 8);
  EXPECT_EQ(r.pipeline->read_ahead_window.value_or(0), 4);
  EXPECT_DOUBLE_EQ(r.pipeline->cache_items.value_or(0), 500);
  EXPECT_EQ(r.pipeline->epoch_images, (std::vector<double>{2000, 1000}));
  EXPECT_TRUE(r.pipeline->has_partitioned_cache_field);
  EXPECT_FALSE(r.pipeline->partitioned_cache);
  EXPECT_DOUBLE_EQ(r.pipeline->stages.at("decode").per_item_ms.value_or(0), 0.75);
  ASSERT_TRUE(r.runner && r.runner->point);
  EXPECT_FALSE(r.runner->signal);
  ASSERT_TRUE(r.stability);
  EXPECT_TRUE(r.stability->short_observations);
}

// The pipeline blocks of every benchmark read: the in-memory sources (vae, recom, translator)
// count their epochs where the image loader lists them, and atari's reports before its worker
// count said "processes". Both were refused by the typed reader, so mlbench-run failed those
// benchmarks in every ./run.sh ("pipeline.epochs is 1 (not an array)").
TEST(InstanceReport, EveryBenchmarksPipelineBlockReads) {
  const auto read = [](const char* pipeline) {
    return parse_instance_report(nlohmann::json::parse(
        std::string(R"({"name": "b", "suite": "s", "schema_version": 1, "pipeline": )") + pipeline + "}"));
  };
  InstanceReport r;
  ASSERT_NO_THROW(r = read(R"({"source": "in-memory", "dataset": "mnist", "epochs": 2, "batches": 7})"));
  EXPECT_EQ(r.pipeline->epoch_count.value_or(0), 2);
  EXPECT_TRUE(r.pipeline->epoch_images.empty());
  ASSERT_NO_THROW(r = read(R"({"source": "environment", "envs": 4, "workers": "processes"})"));
  EXPECT_FALSE(r.pipeline->workers);
  ASSERT_NO_THROW(r = read(R"({"source": "environment", "envs": 4, "workers": 4, "worker_kind": "processes"})"));
  EXPECT_EQ(r.pipeline->workers.value_or(0), 4);
  EXPECT_THROW(read(R"({"epochs": "two"})"), ReportFormatError);
}

TEST(InstanceReport, AnOlderReportReadsWithItsBlocksAbsent) {
  const InstanceReport r =
      parse_instance_report(nlohmann::json::parse(R"({"name": "toy_reg", "suite": "fast", "completed": true,
                               "train_item": {"avg": 10.0, "min": 9.0, "max": 11.0, "unit": "items/sec"}})"));
  EXPECT_EQ(r.schema_version, 0);
  EXPECT_FALSE(r.jr_id);
  EXPECT_FALSE(r.machine);
  EXPECT_FALSE(r.stability);
  EXPECT_FALSE(r.pipeline);
  EXPECT_TRUE(r.completed);
}

TEST(InstanceReport, AWrongFieldIsOneErrorNamingTheFileAndTheField) {
  testing_support::TempDir tmp;
  const std::filesystem::path file = tmp.path() / "s.b.R0.D0.json";
  nlohmann::json j = full_report();
  j["pipeline"]["stages"]["decode"]["busy_s"] = "slow";
  std::ofstream(file) << j.dump();
  try {
    read_instance_report(file);
    FAIL() << "read a report whose field has the wrong type";
  } catch (const ReportFormatError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": pipeline.stages.decode.busy_s is \"slow\" (not a number)");
  }
  std::ofstream(file) << "{\"name\": ";
  EXPECT_THROW(read_instance_report(file), ReportFormatError);
  j = full_report();
  j["batch_loss"] = {0.5, "x"};
  EXPECT_THROW(
      {
        try {
          parse_instance_report(j);
        } catch (const ReportFormatError& e) {
          EXPECT_STREQ(e.what(), "batch_loss[1] is \"x\" (not a number or null)");
          throw;
        }
      },
      ReportFormatError);
}

TEST(InstanceReport, ANewerSchemaIsRefusedWithOneLine) {
  nlohmann::json j = full_report();
  j["schema_version"] = kInstanceReportSchema + 1;
  try {
    parse_instance_report(j);
    FAIL() << "read a report of a newer schema";
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("is newer than this mlbench reads"), std::string::npos) << e.what();
  }
}

TEST(InstanceReport, TheMachineFileReadsAsTheReportsMachineBlock) {
  const MachineInfo m = parse_machine_info(
      nlohmann::json::parse(R"({"hostname": "vm", "cpu_model": "AMD EPYC", "gpus": ["H100"], "slots": []})"));
  EXPECT_EQ(m.hostname, "vm");
  EXPECT_EQ(m.gpus, std::vector<std::string>{"H100"});
  EXPECT_FALSE(report_identity(nlohmann::json::parse(R"({"name": 1, "suite": "s"})")));
  EXPECT_EQ(report_identity(nlohmann::json::parse(R"({"name": "n", "suite": "s"})"))->name, "n");
}

TEST(StallRecord, ReadsTheSplitTheRecommendationAndTheRuns) {
  const StallRecord r = parse_stall_record(nlohmann::json::parse(R"({
    "schema_version": 13, "bench": "loader", "items": 2000, "batch_size": 16, "cores": 2,
    "split": {"compute_pct": 10, "prep_pct": 60, "fetch_pct": 30},
    "rates": {"G": 900, "P": 500, "S_model": 400, "unit": "samples/s"},
    "self_check": {"passed": false, "text": "self-check failed", "cause": null, "points": []},
    "recommendation": {"verdict": "prep-bound", "advice": ["a", "b"], "cores": null},
    "runs": {"cpus-1": {"rate": 700, "report": "r.json", "residency_before": {"files": 3, "pages": 9, "resident_pages": 0}},
             "peer-2": {"rate": 650, "nodes": []}},
    "rounds": {"count": 2, "runs": {"cached": {"rates": [500, 510]}}},
    "whatif": {"curve": [{"x": 0, "fetch": 400, "predicted": 380}], "measured": [{"x": 0.5, "measured": 450}]},
    "reanalysis": {"of": "old/stall.json", "schema_version": 12}
  })"));
  EXPECT_EQ(r.bench, "loader");
  EXPECT_DOUBLE_EQ(r.split.prep_pct, 60);
  EXPECT_EQ(r.rates->raw["unit"], "samples/s") << "the block as written, for exports";
  EXPECT_EQ(r.self_check->text, "self-check failed");
  EXPECT_EQ(r.recommendation->advice, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.runs.at("cpus-1").residency_before->pages, 9u);
  EXPECT_TRUE(r.runs.at("peer-2").nodes);
  EXPECT_EQ(r.round_rates.at("cached"), (std::vector<double>{500, 510}));
  ASSERT_TRUE(r.whatif);
  ASSERT_EQ(r.whatif->curve.size(), 1u);
  EXPECT_DOUBLE_EQ(r.whatif->curve[0].predicted.value_or(0), 380);
  ASSERT_EQ(r.whatif->measured.size(), 1u);
  EXPECT_DOUBLE_EQ(r.whatif->measured[0].measured.value_or(0), 450);
  EXPECT_FALSE(r.whatif->model) << "absent: a result before the field";
  EXPECT_EQ(r.reanalysis_of.value_or(0), 12);
  EXPECT_THROW(parse_stall_record(nlohmann::json::parse(R"({"bench": "x", "split": {"compute_pct": 1}})")),
               ReportFormatError);
  try {
    parse_stall_record(
        nlohmann::json::parse(R"({"bench": "x", "split": {"compute_pct": 1, "prep_pct": "a", "fetch_pct": 1}})"));
    FAIL();
  } catch (const ReportFormatError& e) {
    EXPECT_STREQ(e.what(), "split.prep_pct is \"a\" (not a number)");
  }
}

// What the console summary reads besides: the findings, the direct check, the sweep, the
// what-if's models and remedies, and the recommendation's range; a wrong type deep in a block
// names its whole path.
TEST(StallRecord, ReadsWhatTheConsoleSummaryPrints) {
  const StallRecord r = parse_stall_record(nlohmann::json::parse(R"({
    "bench": "loader", "split": {"compute_pct": 10, "prep_pct": 60, "fetch_pct": 30},
    "noise_pp": {"compute": 1, "prep": 2, "fetch": 3},
    "findings": {"fetch": {"claimed": false, "text": "no fetch stall"}, "prep": {"claimed": true, "text": ""}},
    "direct": {"stall_pct_cold": null, "note": ""}, "prep_by_cores": {"1": 250, "2": 500},
    "warnings": ["w"], "rounds": {"count": 3, "runs": {"cached": {"rates": [1, 2, 3], "spread_pct": 4.5}}},
    "whatif": {"model": "serial", "page_cache": {"measured": [{"x": 0.5, "measured": 1, "predicted": 2, "lo": 1.5,
                                                               "hi": 2.5, "error_pct": 50}]},
               "serial": {"prep_us": 4000, "storage_us": 8000, "page_hit_us": 20, "predicted_cold": 80,
                          "cold_error_pct": 1},
               "coordinated": {"predictions": [{"jobs": 2, "uncoordinated": 1, "coordinated": 2, "gain": 2,
                                                "step_cpu_extra_from": "2 synthetic jobs"}], "devices": 0},
               "partitioned": {"predictions": [{"nodes": 2, "memory_fraction": 0.5, "own": 90, "partitioned": 80,
                                                "gain": 0.9, "partitioned_range": [70, 85]}],
                               "peer_cpu": {"source": "nodes", "used_us": 40, "nodes": 2, "pairs_us": [30, 50]}}},
    "recommendation": {"verdict": "v", "cache_fraction": 0.5, "predicted": 90, "predicted_range": [80, 95],
                       "plateau_share": 0.95}
  })"));
  EXPECT_DOUBLE_EQ(r.noise->fetch, 3);
  EXPECT_EQ(r.fetch_finding->claimed, false);
  EXPECT_EQ(r.fetch_finding->text, "no fetch stall");
  EXPECT_FALSE(r.direct->stall_pct_cold);
  EXPECT_EQ(r.prep_by_cores, (std::map<std::string, double>{{"1", 250}, {"2", 500}}));
  EXPECT_EQ(r.warnings, std::vector<std::string>{"w"});
  EXPECT_EQ(r.rounds_count.value_or(0), 3);
  EXPECT_DOUBLE_EQ(r.round_spread_pct.at("cached"), 4.5);
  EXPECT_EQ(r.whatif->model.value_or(""), "serial");
  ASSERT_EQ(r.whatif->page_measured.size(), 1u);
  EXPECT_DOUBLE_EQ(r.whatif->page_measured[0].hi.value_or(0), 2.5);
  EXPECT_DOUBLE_EQ(r.whatif->serial->page_hit_us.value_or(0), 20);
  EXPECT_EQ(r.whatif->coordinated->predictions[0].step_cpu_extra_from.value_or(""), "2 synthetic jobs");
  EXPECT_EQ(r.whatif->coordinated->prep_cpu_from, "cpus-1") << "the default of results before the field";
  EXPECT_EQ(r.whatif->partitioned->predictions[0].range, (std::pair<double, double>{70, 85}));
  EXPECT_EQ(r.whatif->partitioned->peer_cpu->pairs_us, (std::vector<double>{30, 50}));
  EXPECT_EQ(r.recommendation->predicted_range, (std::pair<double, double>{80, 95}));
  try {
    parse_stall_record(nlohmann::json::parse(R"({"bench": "x", "split": {"compute_pct": 1, "prep_pct": 1,
      "fetch_pct": 1}, "whatif": {"partitioned": {"predictions": [{"nodes": 2, "partitioned_range": [1]}]}}})"));
    FAIL();
  } catch (const ReportFormatError& e) {
    EXPECT_STREQ(e.what(), "whatif.partitioned.predictions[0].partitioned_range is [1] (not [low, high])");
  }
}

}  // namespace
}  // namespace mlbench::core
