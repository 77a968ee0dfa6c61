// mlbench-stall's runs of several nodes at once (the peer runs of the partitioned what-if,
// docs/stall.md): every node gets its rank and the loopback peers, the run combines their reports,
// and a node that fails or hangs fails the run by name, with no process left behind.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "stall/executor.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace mlbench::stall {
namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::alive;
using mlbench::testing_support::TempDir;

// A benchmark stand-in: writes a report into --report DIR with its arguments, a rate of
// 100 + rank and 200 + 100 x rank us of CPU a sample. FAKE_NODE_MODE=fail: rank 1 exits 3;
// hang: rank 1 writes its pid and sleeps.
constexpr const char* kFakeBench = R"(#!/bin/sh
all="$*"; report=""; rank=0
while [ $# -gt 0 ]; do
  case "$1" in
    --report) report="$2"; shift 2 ;;
    --rank) rank="$2"; shift 2 ;;
    *) shift ;;
  esac
done
if [ "$rank" = 1 ] && [ "$FAKE_NODE_MODE" = fail ]; then echo "node one: out of cheese" >&2; exit 3; fi
if [ "$rank" = 1 ] && [ "$FAKE_NODE_MODE" = hang ]; then echo $$ > "$FAKE_NODE_PID"; exec sleep 60; fi
cat > "$report/r.json" <<EOF
{"completed": true, "args": "$all", "train_item": {"avg": $((100 + rank))}, "train": {"avg": 1.0, "sd": 0.0, "count": 10},
 "process_cpu": {"per_item_us": $((200 + 100 * rank)), "user_s": 1.5, "sys_s": 0.5, "wall_s": 2.0}}
EOF
)";

class ExecutorNodes : public testing::Test {
 protected:
  void SetUp() override {
    bench_ = tmp_.path() / "fake_bench";
    std::ofstream(bench_) << kFakeBench;
    fs::permissions(bench_, fs::perms::owner_all, fs::perm_options::add);
    fs::create_directories(tmp_.path() / "data");
    std::ofstream(tmp_.path() / "data" / "f.bin") << std::string(4096, 'x');
  }
  void TearDown() override { ::unsetenv("FAKE_NODE_MODE"); }
  ProcessExecutor executor(int timeout_s) {
    return ProcessExecutor(bench_, tmp_.path() / "out", {tmp_.path() / "data" / "f.bin"}, false, timeout_s);
  }
  RunSpec spec(bool peers) const {
    RunSpec s;
    s.label = peers ? "peer-2" : "peer-local";
    s.kind = "peer";
    s.args = {"--data", (tmp_.path() / "data").string()};
    s.cache = CacheState::Any;
    s.nodes = 2;
    s.peers = peers;
    return s;
  }
  TempDir tmp_{"executor_nodes"};
  fs::path bench_;
};

TEST_F(ExecutorNodes, EveryNodeGetsItsRankAndTheSamePeersAndTheRunCombinesThem) {
  auto ex = executor(60);
  const RunOutcome r = ex.run(spec(true));
  ASSERT_EQ(r.nodes.size(), 2u);
  const std::string a0 = r.nodes[0].report["args"], a1 = r.nodes[1].report["args"];
  EXPECT_NE(a0.find("--rank 0"), std::string::npos) << a0;
  EXPECT_NE(a1.find("--rank 1"), std::string::npos) << a1;
  // The same two loopback peers for both, on two ports.
  const auto peers = [](const std::string& args) {
    const auto at = args.find("--peers ");
    return at == std::string::npos ? std::string() : args.substr(at + 8, args.find(' ', at + 8) - at - 8);
  };
  EXPECT_EQ(peers(a0), peers(a1));
  EXPECT_EQ(peers(a0).rfind("127.0.0.1:", 0), 0u) << a0;
  const auto comma = peers(a0).find(',');
  ASSERT_NE(comma, std::string::npos) << a0;
  EXPECT_NE(peers(a0).substr(0, comma), peers(a0).substr(comma + 1)) << "two nodes on one port: " << a0;
  // Combined: the nodes' mean rate, mean CPU per sample, CPU seconds summed.
  EXPECT_DOUBLE_EQ(r.rate, 100.5);
  EXPECT_DOUBLE_EQ(r.report["process_cpu"]["per_item_us"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(r.report["process_cpu"]["user_s"].get<double>(), 3.0);
  EXPECT_EQ(r.report["process_cpu"]["nodes"], 2);
  // Without peers: no --peers, no --rank.
  const RunOutcome local = ex.run(spec(false));
  for (const auto& n : local.nodes) {
    const std::string args = n.report["args"];
    EXPECT_EQ(args.find("--peers"), std::string::npos) << args;
    EXPECT_EQ(args.find("--rank"), std::string::npos) << args;
  }
}

TEST_F(ExecutorNodes, ANodeThatFailsFailsTheRunNamingTheNodeAndItsLastLine) {
  ::setenv("FAKE_NODE_MODE", "fail", 1);
  auto ex = executor(60);
  try {
    ex.run(spec(true));
    FAIL() << "a run with a failed node succeeded";
  } catch (const RunFailed& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("run peer-2: node 1 exited with status 3: node one: out of cheese"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
  }
}

TEST_F(ExecutorNodes, ANodeThatHangsTimesOutAndNoNodeOutlivesTheRun) {
  const fs::path pid_file = tmp_.path() / "hung.pid";
  ::setenv("FAKE_NODE_MODE", "hang", 1);
  ::setenv("FAKE_NODE_PID", pid_file.c_str(), 1);
  auto ex = executor(2);
  try {
    ex.run(spec(true));
    FAIL() << "a run with a hung node succeeded";
  } catch (const RunFailed& e) {
    EXPECT_NE(std::string(e.what()).find("run peer-2 timed out after 2 s"), std::string::npos) << e.what();
  }
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0) << "the hung node never started";
  EXPECT_FALSE(alive(pid)) << "the hung node outlived its run";
  ::unsetenv("FAKE_NODE_PID");
}

}  // namespace
}  // namespace mlbench::stall
