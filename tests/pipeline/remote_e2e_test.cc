// Datasets over HTTP and in tar shards, end to end: the real `loader`, `mlbench-datagen` and
// `mlbench-stall` binaries on a tiny ImageFolder served by nginx on loopback
// (tests/support/http_fixtures.h) or packed into shards.
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/http_fixtures.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace mt = mlbench::testing;
using mlbench::testing_support::run_command;
using mlbench::testing_support::TempDir;

const std::string kBin = MLBENCH_BIN_DIR;
const std::string kBench = MLBENCH_BENCH_DIR;

// TMP/set: 2 classes x 24 JPEGs with the listing `mlbench-datagen listing` writes.
fs::path served_set(const TempDir& tmp) {
  mt::make_readable_by_others(tmp.path());
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path() / "set", 2, 24);
  const auto r = run_command(fmt::format("{}/mlbench-datagen listing --root {}", kBin, root.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return root;
}

mt::NginxOptions serve(const fs::path& root) {
  mt::NginxOptions o;
  o.root = root;
  return o;
}

nlohmann::json only_report(const fs::path& dir, const std::string& marker = ".json") {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().find(marker) != std::string::npos && e.path().extension() == ".json")
      found.push_back(e.path());
  }
  EXPECT_EQ(found.size(), 1u) << dir;
  if (found.empty()) return {};
  std::ifstream in(found.front());
  return nlohmann::json::parse(in);
}

std::string loader_cmd(const std::string& data, const fs::path& report, const std::string& more = "") {
  return fmt::format(
      "{}/loader --data '{}' --workers 2 -b 8 --image-size 32 --repeat 3 --number 2 --warmup 1 "
      "--no-cuda --report {} {} 2>&1",
      kBench, data, report.string(), more);
}

TEST(RemoteE2E, TheLoaderReadsADatasetOverHttp) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_http");
  const fs::path root = served_set(tmp);
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  const auto r = run_command(loader_cmd(nginx->url("/set/"), tmp.path() / "rep", "--io-depth 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = only_report(tmp.path() / "rep");
  const auto& p = report.at("pipeline");
  EXPECT_EQ(p.at("source"), "http");
  EXPECT_EQ(p.at("root"), nginx->url("/set/"));
  EXPECT_EQ(p.at("source_detail").at("kind"), "http");
  EXPECT_GT(p.at("source_detail").at("requests").get<int>(), 8);
  EXPECT_EQ(p.at("source_detail").at("failed"), 0);
  EXPECT_EQ(p.at("corrupt_samples"), 0);
}

// Over HTTP without --io-depth the requests in flight adapt (docs/pipeline.md, "Read-ahead"): at
// 40 ms a request and no decode (--fetch-only), 8 in flight fetch about 190 objects/s and 16 about
// twice that, however loaded the machine, so the depth must have settled above 8. The search
// takes at most 5 measurements of 0.5 s or more: about 1,900 reads here, at most about 2,500
// (2 workers with batches of 16 keep at most 64 reads in flight, 1,600/s at 40 ms); the run reads
// 3,200 objects, about 4 s. (--min-time would not do: it calibrates the batches per observation
// at the first depth.) Given explicitly, --io-depth 8 stays 8.
TEST(RemoteE2E, OverASlowServerTheDepthAdaptsUnlessGiven) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_adaptive");
  served_set(tmp);
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  mt::DelayProxy proxy("127.0.0.1", nginx->port(), std::chrono::milliseconds(40));
  const auto run = [&](const std::string& name, int batches, const std::string& more) {
    const fs::path dir = tmp.path() / name;
    const auto r = run_command(fmt::format(
        "{}/loader --data '{}' --workers 2 -b 16 --image-size 32 --fetch-only --repeat {} --number 10 --warmup 0 "
        "--no-cuda --report {} {} 2>&1",
        kBench, proxy.url("/set/"), batches / 10, dir.string(), more));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return only_report(dir);
  };

  const auto adaptive = run("adaptive", 200, "");
  ASSERT_TRUE(adaptive.is_object());
  const auto& p = adaptive.at("pipeline");
  const auto& a = p.at("read_ahead").at("adaptive");
  ASSERT_TRUE(a.is_object()) << p.dump();
  EXPECT_EQ(a.at("start"), 8);
  EXPECT_EQ(a.at("bound"), 128);
  EXPECT_EQ(p.at("read_ahead").at("io_threads"), 128);
  ASSERT_GE(a.at("steps").size(), 2u) << a.dump();
  EXPECT_EQ(a.at("steps")[0].at("depth"), 8);
  EXPECT_EQ(a.at("steps")[1].at("depth"), 16);
  ASSERT_FALSE(a.at("settled").is_null()) << "the run ended still measuring: " << a.dump();
  EXPECT_GT(a.at("settled").get<int>(), 8) << a.dump();
  EXPECT_EQ(p.at("io_depth"), a.at("settled"));  // the depth as run is the settled one
  EXPECT_GT(p.at("source_detail").at("max_in_flight").get<int>(), 8);
  EXPECT_EQ(p.at("corrupt_samples"), 0);

  const auto fixed = run("fixed", 10, "--io-depth 8");
  ASSERT_TRUE(fixed.is_object());
  const auto& f = fixed.at("pipeline");
  EXPECT_TRUE(f.at("read_ahead").at("adaptive").is_null()) << f.dump();
  EXPECT_EQ(f.at("io_depth"), 8);
  EXPECT_EQ(f.at("read_ahead").at("io_threads"), 8);
  EXPECT_LE(f.at("source_detail").at("max_in_flight").get<int>(), 8);
  // The client's CPU per request as its threads spent it (mlbench-stall's request_cpu.direct_us):
  // the transfer thread's and the I/O threads' in their reads.
  EXPECT_GT(f.at("source_detail").at("transfer_cpu_s").get<double>(), 0.0) << f.dump();
  EXPECT_GT(f.at("read_ahead").at("read_cpu_s").get<double>(), 0.0) << f.dump();
  EXPECT_GT(f.at("read_ahead").at("cpu_per_read_us").get<double>(), 0.0) << f.dump();
  // Where a request's cycle went beside its read: timed on the I/O threads and at the workers' takes.
  const auto& ra = f.at("read_ahead");
  EXPECT_GE(ra.at("queue_wait_ms").get<double>(), 0.0) << ra.dump();
  const double waited = ra.at("takes_waited").get<double>();
  EXPECT_GE(waited, 0.0);
  EXPECT_LE(waited, 1.0);
  EXPECT_TRUE(ra.at("wake_ms").is_number() || ra.at("item_wait_ms").is_number()) << ra.dump();
}

TEST(RemoteE2E, AUrlWithoutAListingIsOneLineAndExit2) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_nolisting");
  const fs::path root = served_set(tmp);
  fs::remove(root / "mlbench-listing.json");
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  const auto r = run_command(loader_cmd(nginx->url("/set/"), tmp.path() / "rep"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("loader: error: dataset listing " + nginx->url("/set/mlbench-listing.json") + ": HTTP 404"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("mlbench-datagen listing"), std::string::npos) << r.output;
}

TEST(RemoteE2E, AServerThatGoesAwayMidRunIsAFailReportNamingIt) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_gone");
  const fs::path root = served_set(tmp);
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  // 30 ms a request: the run lasts long enough to lose its server part-way.
  mt::DelayProxy proxy("127.0.0.1", nginx->port(), std::chrono::milliseconds(30));
  mlbench::core::ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", fmt::format("{}/loader --data '{}' --workers 2 -b 8 --image-size 32 --repeat 1000 --number 2 "
                                 "--warmup 0 --no-cuda --fetch-retries 1 --report {} 2>&1",
                                 kBench, proxy.url("/set/"), (tmp.path() / "rep").string())};
  std::string output;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    nginx->stop();
  });
  const auto result = mlbench::core::run_captured(spec);
  stopper.join();
  EXPECT_NE(result.status.shell_code(), 0) << result.output;
  EXPECT_NE(result.output.find("stopped answering"), std::string::npos) << result.output;
  const auto fail = only_report(tmp.path() / "rep", ".FAIL.");
  ASSERT_TRUE(fail.is_object());
  EXPECT_NE(fail.dump().find("stopped answering"), std::string::npos) << fail.dump();
}

TEST(RemoteE2E, DatagenShardsAndTheLoaderOverThem) {
  const TempDir tmp("remote_e2e_shards");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path() / "set", 2, 24);
  const fs::path shards = tmp.path() / "shards";
  auto r = run_command(fmt::format("{}/mlbench-datagen shards --from {} --out {} --shard-size 200K -q", kBin,
                                   root.string(), shards.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(loader_cmd((shards / "*.tar").string(), tmp.path() / "rep", "--shuffle-buffer 16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = only_report(tmp.path() / "rep");
  const auto& p = report.at("pipeline");
  EXPECT_EQ(p.at("source"), "tar-shards");
  EXPECT_GE(p.at("source_detail").at("shards").get<int>(), 2);
  EXPECT_EQ(p.at("source_detail").at("items"), 48);
  EXPECT_EQ(p.at("corrupt_samples"), 0);
}

TEST(RemoteE2E, MlbenchStallModelsTheIoDepthOfADatasetOverHttp) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_stall");
  served_set(tmp);
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  const fs::path out = tmp.path() / "stall";
  const auto r = run_command(
      fmt::format("{}/mlbench-stall --bench loader --bench-dir {} --data {} --cpus 1 --cache-fracs 0.5 --io-depths 2 "
                  "--iterations 4 --peer-nodes 0 --out {} -- -b 8 --workers 1 --image-size 32 --no-cuda 2>&1",
                  kBin, kBench, nginx->url("/set/"), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("storage (HTTP):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted samples/s by --io-depth"), std::string::npos) << r.output;
  std::ifstream in(out / "stall.json");
  const auto stall = nlohmann::json::parse(in);
  const auto& io = stall.at("whatif").at("http");
  EXPECT_GT(io.at("latency_ms").get<double>(), 0);
  EXPECT_GT(io.at("bandwidth_MBps").get<double>(), 0);
  // L1 probed again after the runs, and each held-out run's prediction with its range.
  EXPECT_NE(r.output.find("storage (HTTP), again after the runs:"), std::string::npos) << r.output;
  EXPECT_GT(io.at("probe_latency_end_ms").get<double>(), 0) << io.dump();
  EXPECT_GT(io.at("probe_latency_u").get<double>(), 0) << io.dump();
  // The client's CPU per request as its threads spent it, taken from the cached run.
  EXPECT_EQ(io.at("request_cpu").at("client_from"), "cached (its threads)") << io.dump();
  EXPECT_GT(io.at("request_cpu").at("direct_us").at("cold").get<double>(), 0) << io.dump();
  std::set<std::string> checked;
  for (const auto& m : io.at("measured")) {
    checked.insert(m.at("run").get<std::string>());
    ASSERT_TRUE(m.at("range").is_array()) << m.dump();
    EXPECT_LE(m.at("range")[0].get<double>(), m.at("predicted").get<double>()) << m.dump();
    EXPECT_GE(m.at("range")[1].get<double>(), m.at("predicted").get<double>()) << m.dump();
    EXPECT_TRUE(m.at("off").is_boolean()) << m.dump();
  }
  EXPECT_EQ(checked, (std::set<std::string>{"cold", "iodepth-2", "cache-0.50"}));
  EXPECT_TRUE(stall.at("whatif").at("shards").is_null());
  EXPECT_FALSE(stall.at("runs").contains("page-0.50"));
}

// `set`'s listing with `object` appended (its label 0).
void append_to_listing(const fs::path& root, const nlohmann::json& object) {
  nlohmann::json listing;
  {
    std::ifstream in(root / "mlbench-listing.json");
    listing = nlohmann::json::parse(in);
  }
  listing["objects"].push_back(object);
  std::ofstream(root / "mlbench-listing.json", std::ios::trunc) << listing.dump();
}

// A listing naming ../secret.txt made the loader request /secret.txt, and the run passed. Now the
// listing is refused before the first request: one line naming the entry, exit 2, a FAIL report.
TEST(RemoteE2E, AListingPathOutsideThePrefixIsExit2AndAFailReportNamingIt) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_escape");
  const fs::path root = served_set(tmp);
  std::ofstream(tmp.path() / "secret.txt") << "a secret";
  mt::make_readable_by_others(tmp.path());
  append_to_listing(root, {"../secret.txt", 8, 0});
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  const auto r = run_command(loader_cmd(nginx->url("/set/"), tmp.path() / "rep"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::string line = "loader: error: dataset listing " + nginx->url("/set/mlbench-listing.json") +
                           ": object 48 \"../secret.txt\": a '..' segment";
  EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
  const auto fail = only_report(tmp.path() / "rep", ".FAIL.");
  ASSERT_TRUE(fail.is_object());
  EXPECT_FALSE(fail.at("completed").get<bool>());
  EXPECT_NE(fail.at("reason").get<std::string>().find("\"../secret.txt\": a '..' segment"), std::string::npos)
      << fail.dump();
}

// Sizes of 10^18 and -5 ended in std::bad_alloc and std::length_error: exit 134, no report.
TEST(RemoteE2E, AHugeOrNegativeSizeInAListingIsExit2AndAFailReportNotAnAbort) {
  std::unique_ptr<mt::NginxServer> nginx;
  const TempDir tmp("remote_e2e_sizes");
  const fs::path root = served_set(tmp);
  const std::string listing = (root / "mlbench-listing.json").string();
  fs::copy_file(listing, listing + ".orig");
  MLBENCH_START_NGINX(nginx, serve(tmp.path()));
  for (const auto& [size, shown] : std::vector<std::pair<nlohmann::json, std::string>>{
           {1000000000000000000ull, "1000000000000000000"}, {-5, "-5"}}) {
    SCOPED_TRACE(shown);
    fs::copy_file(listing + ".orig", listing, fs::copy_options::overwrite_existing);
    nlohmann::json object = {"c0/0.jpg", size, 0};
    append_to_listing(root, object);
    const fs::path rep = tmp.path() / ("rep" + shown);
    const auto r = run_command(loader_cmd(nginx->url("/set/"), rep));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("object 48 \"c0/0.jpg\": size " + shown + " is not an integer from 1 to 1073741824"),
              std::string::npos)
        << r.output;
    const auto fail = only_report(rep, ".FAIL.");
    ASSERT_TRUE(fail.is_object());
    EXPECT_NE(fail.at("reason").get<std::string>().find("size " + shown), std::string::npos) << fail.dump();
  }
}

}  // namespace
