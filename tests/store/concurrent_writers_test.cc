// Concurrent writers (docs/reliability.md): four mlbench processes recording into one
// store at once, on both back-ends, lose nothing: they queue on the write lock (SQLite:
// BEGIN IMMEDIATE and the busy timeout; PostgreSQL: the advisory lock), and the first
// opens of a new store migrate it once.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/results_store.h"
#include "tests/store/postgres_server.h"
#include "tests/support/temp_dir.h"

namespace mlbench::store {
namespace {

constexpr int kWriters = 4;
constexpr int kInstancesPerWriter = 50;

std::string run_id_of(int writer) {
  return fmt::format("20240501T100000Z-{}", 1000 + writer);
}
std::string file_of(int writer, int i) {
  return fmt::format("fast/bench{}/fast.bench{}.R1.D{}.2024.json", i, i, writer);
}

// In a child: opens its own store, records its run and its instances; 0 when all went in.
int write_as_child(const std::string& spec, int writer, int start_fd) {
  char go;
  if (read(start_fd, &go, 1) < 0) return 3;  // the start line: all four open at once
  try {
    auto store = ResultsStore::open(spec);
    RunRecord run;
    run.run_id = run_id_of(writer);
    run.suite = "fast";
    run.started_at = "2024-05-01T10:00:00Z";
    store->record_run(run);
    for (int i = 0; i < kInstancesPerWriter; ++i) {
      InstanceRecord inst;
      inst.run_id = run.run_id;
      inst.pass = 1;
      inst.slot = writer;
      inst.bench = fmt::format("bench{}", i);
      inst.job = inst.bench;
      inst.file = file_of(writer, i);
      inst.items_per_s = 100.0 * writer + i;
      inst.report = {{"name", inst.bench}};
      store->record_instance(inst);
    }
    run.status = "finished";
    store->record_run(run);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writer %d: %s\n", writer, e.what());
    return 1;
  }
}

// Forks the writers, starts them together, waits for them; then every record is there.
void four_writers_lose_nothing(const std::string& spec) {
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(start[1]);
      std::fflush(stderr);
      _exit(write_as_child(spec, w, start[0]));
    }
    children.push_back(pid);
  }
  close(start[0]);
  close(start[1]);  // every child's read returns: go
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed (its error is above)";
  }

  auto store = ResultsStore::open(spec);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kWriters));
  for (const RunRecord& r : runs) EXPECT_EQ(r.status, "finished") << r.run_id;
  std::set<std::pair<std::string, std::string>> seen;
  for (const HistoryInstance& h : store->instances({})) seen.emplace(h.instance.run_id, h.instance.file);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kWriters * kInstancesPerWriter));
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kInstancesPerWriter; ++i) {
      EXPECT_TRUE(seen.contains({run_id_of(w), file_of(w, i)})) << file_of(w, i);
    }
  }
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
}

TEST(ConcurrentWriters, FourSqliteWritersLoseNothing) {
  testing_support::TempDir dir("store_writers");
  four_writers_lose_nothing((dir.path() / "results.db").string());
}

using ConcurrentPostgresWriters = testing_support::PostgresTest;

TEST_F(ConcurrentPostgresWriters, FourWritersLoseNothing) {
  four_writers_lose_nothing(url_);
}

}  // namespace
}  // namespace mlbench::store
