// The results store (store/results_store.h) on a real PostgreSQL server: the schema
// made on open, every writer and reader round-tripping, a newer store refused.
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "core/credentials.h"
#include "store/results_store.h"
#include "tests/store/postgres_server.h"
#include "tests/support/run_command.h"

namespace mlbench::store {
namespace {

using PostgresStore = testing_support::PostgresTest;

MachineRecord a_machine() {
  MachineRecord m;
  m.fingerprint = "0123456789abcdef";
  m.kind = "NVIDIA H100 80GB HBM3";
  m.hostname = "node1";
  m.cpu_model = "AMD EPYC 9454";
  m.kernel = "6.1.0";
  m.cgroup_mode = "v2";
  m.blas = "openblas-openmp";
  m.libtorch = "2.3.0";
  m.driver = "550.54";
  m.logical_cores = 96;
  m.memory_bytes = 1'099'511'627'776;
  m.gpu_count = 8;
  m.gpu_model = "NVIDIA H100 80GB HBM3";
  m.json = {{"hostname", "node1"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}};
  return m;
}

RunRecord a_run(const std::string& id, const std::string& machine = "") {
  RunRecord r;
  r.run_id = id;
  r.suite = "fast";
  r.jobs_file = "configs/fast.json";
  r.started_at = "2024-05-01T10:00:00Z";
  r.mlbench_version = "0.1.0";
  r.mlbench_commit = "abc1234";
  r.command = "./run.sh --label 'it''s ?'";
  r.outdir = "/results/" + id;
  r.label = "it's ?";
  r.machine = machine;
  return r;
}

InstanceRecord an_instance(const std::string& run_id, const std::string& file) {
  InstanceRecord i;
  i.run_id = run_id;
  i.pass = 1;
  i.slot = 0;
  i.bench = "convnet";
  i.job = "convnet";
  i.file = file;
  i.items_per_s = 1234.5;
  i.stall_pct = 12.25;
  i.wait_s = 0.5;
  i.h2d_s = 0.125;
  i.compute_s = 3.0;
  i.fetch_ms_per_item = 0.75;
  i.prep_ms_per_item = std::nullopt;
  i.start_time = "2024-05-01T10:00:01Z";
  i.report = {{"name", "convnet"}, {"train_item", {{"mean", 1234.5}}}};
  return i;
}

TEST_F(PostgresStore, OpenCreatesTheSchemaAndAgainKeepsIt) {
  {
    auto store = ResultsStore::open(url_);
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
    EXPECT_EQ(store->database().kind(), "postgresql");
    EXPECT_EQ(store->name().find(server_->password()), std::string::npos);
    EXPECT_TRUE(store->runs().empty());
  }
  auto again = ResultsStore::open(url_);
  EXPECT_EQ(again->schema_version(), kStoreSchemaVersion);
}

TEST_F(PostgresStore, EveryWriterRoundTripsThroughItsReader) {
  auto store = ResultsStore::open(url_);
  const MachineRecord m = a_machine();
  store->record_machine(m);
  store->record_machine(m);  // idempotent
  RunRecord run = a_run("20240501T100000Z-42", m.fingerprint);
  store->record_run(run);
  run.status = "finished";
  run.finished_at = "2024-05-01T11:00:00Z";
  store->record_run(run);  // the same run: its end
  store->record_instance(an_instance(run.run_id, "fast/convnet/fast.convnet.R1.D0.2024.json"));
  InstanceRecord failed = an_instance(run.run_id, "fast/convnet/fast.convnet.R1.D1.FAIL.2024.json");
  failed.slot = 1;
  failed.failed = true;
  failed.reason = "oom";
  failed.items_per_s = std::nullopt;
  store->record_instance(failed);

  const auto machines = store->machines();
  ASSERT_EQ(machines.size(), 1u);
  EXPECT_EQ(machines[0].fingerprint, m.fingerprint);
  EXPECT_EQ(machines[0].kind, m.kind);
  EXPECT_EQ(machines[0].cpu_model, m.cpu_model);
  EXPECT_EQ(machines[0].logical_cores, 96);
  EXPECT_EQ(machines[0].memory_bytes, m.memory_bytes);
  EXPECT_EQ(machines[0].gpu_count, 8);
  EXPECT_EQ(machines[0].json, m.json);

  const auto got = store->run(run.run_id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status, "finished");
  EXPECT_EQ(got->finished_at, "2024-05-01T11:00:00Z");
  EXPECT_EQ(got->label, "it's ?");
  EXPECT_EQ(got->command, run.command);
  EXPECT_EQ(got->machine, m.fingerprint);
  EXPECT_FALSE(store->run("no-such-run").has_value());
  EXPECT_EQ(store->runs("fast").size(), 1u);
  EXPECT_TRUE(store->runs("other").empty());

  EXPECT_TRUE(store->has_instance(run.run_id, "fast/convnet/fast.convnet.R1.D0.2024.json"));
  EXPECT_FALSE(store->has_instance(run.run_id, "fast/convnet/other.json"));
  InstanceQuery q;
  q.bench = "convnet";
  q.with_report = true;
  const auto instances = store->instances(q);
  ASSERT_EQ(instances.size(), 2u);
  const InstanceRecord& ok = instances[0].instance;
  EXPECT_FALSE(ok.failed);
  EXPECT_EQ(ok.items_per_s, 1234.5);
  EXPECT_EQ(ok.stall_pct, 12.25);
  EXPECT_EQ(ok.h2d_s, 0.125);
  EXPECT_EQ(ok.fetch_ms_per_item, 0.75);
  EXPECT_FALSE(ok.prep_ms_per_item.has_value());
  EXPECT_EQ(ok.report, an_instance("", "").report);
  EXPECT_EQ(instances[0].run.run_id, run.run_id);
  EXPECT_TRUE(instances[1].instance.failed);
  EXPECT_EQ(instances[1].instance.reason, "oom");
  EXPECT_FALSE(instances[1].instance.items_per_s.has_value());
  q.machine = "another-machine";
  EXPECT_TRUE(store->instances(q).empty());

  StallAnalysisRecord a;
  a.analysis_id = "fedcba9876543210";
  a.run_id = run.run_id;
  a.bench = "convnet";
  a.machine = m.fingerprint;
  a.recorded_at = "2024-05-01T12:00:00Z";
  a.data = "imagenet-mini";
  a.compute_pct = 60;
  a.prep_pct = 30.5;
  a.fetch_pct = 9.5;
  a.items_per_s_cold = 800;
  a.verdict = "prep-bound";
  a.recommendation = "more CPU cores";
  a.analysis = {{"bench", "convnet"}};
  store->record_stall(a);
  store->record_stall(a);  // importing twice records it once
  const auto analyses = store->stall_analyses("convnet");
  ASSERT_EQ(analyses.size(), 1u);
  EXPECT_EQ(analyses[0].prep_pct, 30.5);
  EXPECT_EQ(analyses[0].items_per_s_cold, 800);
  EXPECT_FALSE(analyses[0].items_per_s_warm.has_value());
  EXPECT_EQ(analyses[0].verdict, "prep-bound");
  EXPECT_EQ(analyses[0].analysis, a.analysis);
  EXPECT_TRUE(store->stall_analyses("other").empty());
}

TEST_F(PostgresStore, ARerunOfTheSameInstanceReplacesTheOneBefore) {
  auto store = ResultsStore::open(url_);
  store->record_run(a_run("r1"));
  InstanceRecord first = an_instance("r1", "fast.convnet.R1.D0.FAIL.2024-05-01T10-00-00.json");
  first.failed = true;
  store->record_instance(first);
  store->record_instance(an_instance("r1", "fast.convnet.R1.D0.2024-05-01T10-30-00.json"));
  const auto instances = store->instances({});
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_FALSE(instances[0].instance.failed);
}

TEST_F(PostgresStore, AStoreOfANewerSchemaIsRefusedInOneLine) {
  {
    auto store = ResultsStore::open(url_);
    store->database().query("INSERT INTO mlbench_schema (version) VALUES (?)",
                            {std::to_string(kStoreSchemaVersion + 1)});
  }
  try {
    ResultsStore::open(url_);
    FAIL() << "a newer store was opened";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_TRUE(message.starts_with(core::mask_credentials(url_) + ": ")) << message;
    EXPECT_NE(message.find("newer"), std::string::npos) << message;
    EXPECT_EQ(message.find(server_->password()), std::string::npos) << message;
  }
}

// mlbench-report's history on a PostgreSQL store: two runs of the loader on one machine, 2 passes
// each, the second slower with its wait grown where the pipeline's time is prep: both runs, the
// regression with its size, and the time moved into prep.
TEST_F(PostgresStore, TheHistoryOnPostgresqlShowsTheRegressionAndWhereItsTimeWent) {
  auto s = ResultsStore::open(url_);
  MachineRecord m = a_machine();
  s->record_machine(m);
  int file = 0;
  for (const auto& [id, when, rate, wait] : {std::tuple{"r1", "2026-11-27T01:00:00Z", 1000.0, 0.004},
                                             std::tuple{"r2", "2026-11-28T01:00:00Z", 600.0, 0.0107}}) {
    RunRecord run = a_run(id, m.fingerprint);
    run.started_at = when;
    s->record_run(run);
    for (int pass = 0; pass < 2; ++pass) {
      InstanceRecord i = an_instance(id, "R" + std::to_string(pass) + "/fast.loader.R" + std::to_string(pass) + ".D0." +
                                             std::to_string(++file) + ".json");
      i.bench = i.job = "loader";
      i.pass = pass;
      i.items_per_s = rate + pass;
      i.wait_s = wait;
      i.h2d_s = 0.0;
      i.compute_s = 0.012;  // batch of 16: 0.75 ms/item of compute in both runs
      i.fetch_ms_per_item = 0.05;
      i.prep_ms_per_item = 1.5;
      s->record_instance(i);
    }
  }
  const auto h = testing_support::run_command(std::string(MLBENCH_REPORT_BIN) + " --store '" + url_ +
                                              "' --history loader --color never");
  ASSERT_EQ(h.exit_code, 0) << h.output;
  EXPECT_NE(h.output.find("loader on NVIDIA H100 80GB HBM3 / node1: 2 runs"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("regression -40.0% (by size; 2 v 2 passes, the test needs 4 a side)"), std::string::npos)
      << h.output;
  EXPECT_NE(h.output.find("its time moved into prep"), std::string::npos) << h.output;
  EXPECT_EQ(h.output.find(url_), std::string::npos) << "the password is not printed\n" << h.output;
}

}  // namespace
}  // namespace mlbench::store
