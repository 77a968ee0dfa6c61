// The HTML page in a real browser: generates a reports tree (three benchmarks,
// one with an mlbench-stall analysis and its chart), writes the page with the
// real mlbench-report, opens it in headless Chromium and checks that
//  - scripts ran to the end (the page sets body[data-rendered=ok] last),
//  - nothing reached the console: Chromium logs every console message
//    (errors, uncaught exceptions, CSP violations such as a network fetch) to
//    stderr as ":CONSOLE" lines with --enable-logging=stderr --v=0, and the page
//    itself logs nothing, so any such line is a failure,
//  - the DOM after scripts ran (--dump-dom) holds one bar group per benchmark.
// Skips, saying why, when /usr/bin/chromium is missing (its set-up test installs it).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "report_tree_writer.h"

namespace mlbench::report::testing {
namespace {
namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";

struct BrowserRun {
  int status = -1;
  std::string dom;  // the DOM after scripts ran (--dump-dom)
  std::string log;  // Chromium's stderr, console messages included
};

// Opens `page` in headless Chromium with a fresh profile under `work`.
BrowserRun open_in_chromium(const fs::path& page, const fs::path& work) {
  fs::create_directories(work / "profile");
  const fs::path dom_file = work / "dom.html", log_file = work / "chromium.log";
  // In a subshell: run_command appends "2>&1", which must not undo the redirection of stderr to the log.
  const std::string cmd = std::string("(timeout 120 ") + kChromium +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update --disable-sync"
                          " --user-data-dir=" +
                          (work / "profile").string() + " --enable-logging=stderr --v=0 --dump-dom file://" +
                          page.string() + " >" + dom_file.string() + " 2>" + log_file.string() + ")";
  BrowserRun r;
  r.status = run_command(cmd).status;
  r.dom = read_text(dom_file);
  r.log = read_text(log_file);
  return r;
}

TEST(ReportBrowser, HtmlRendersWithoutConsoleErrorsAndOneBarGroupPerBench) {
  if (access(kChromium, X_OK) != 0) {
    GTEST_SKIP() << kChromium << " is not installed (its set-up test report.browser_setup could not install it: "
                 << "not root, no apt-get or no network); the HTML page was not checked in a browser";
  }
  TempDir tmp;
  const fs::path tree = tmp.path() / "out";
  const std::vector<std::string> benches{"loader", "toy_reg", "vae"};
  for (int run = 0; run < 4; ++run) {
    for (std::size_t b = 0; b < benches.size(); ++b) {
      FakeInstance i;
      i.name = benches[b];
      i.run = run;
      i.items_per_s = 100.0 * static_cast<double>(b + 1) + run;
      i.nan_loss = benches[b] == "vae" && run == 1;  // a failure shows up too
      write_fake_report(tree, i);
    }
  }
  {
    fs::create_directories(tree / "stall");
    std::ofstream(tree / "stall" / "stall.json")
        << R"({"bench": "loader", "split": {"compute_pct": 50, "prep_pct": 30, "fetch_pct": 20}, "rates": {}})";
    std::ofstream(tree / "stall" / "split.svg")
        << R"(<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>)";
  }
  { std::ofstream(tmp.path() / "targets.json") << R"({"benchmarks": {"loader": 90, "toy_reg": 250, "vae": 300}})"; }
  const fs::path html = tmp.path() / "report.html";
  const CommandResult made =
      run_command(std::string(MLBENCH_REPORT_BIN) + " --reports " + tree.string() + " --name fast --targets " +
                  (tmp.path() / "targets.json").string() + " --html " + html.string());
  ASSERT_EQ(made.status, 0) << made.output;

  // Control: a page that logs an error must show up as a :CONSOLE line, or the check below
  // would pass without looking (e.g. if a Chromium version stopped logging the console).
  const fs::path control = tmp.path() / "control.html";
  std::ofstream(control)
      << "<!DOCTYPE html><html><body><script>console.error('mlbench-control')</script></body></html>";
  const BrowserRun control_run = open_in_chromium(control, tmp.path() / "control");
  ASSERT_EQ(control_run.status, 0) << "chromium failed:\n" << control_run.log;
  ASSERT_NE(control_run.log.find(":CONSOLE"), std::string::npos) << "chromium does not log console messages:\n"
                                                                 << control_run.log;
  ASSERT_NE(control_run.log.find("mlbench-control"), std::string::npos) << control_run.log;

  const BrowserRun run = open_in_chromium(html, tmp.path() / "page");
  const std::string& dom = run.dom;
  const std::string& log = run.log;
  ASSERT_EQ(run.status, 0) << "chromium failed:\n" << log;

  std::string console;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  }
  EXPECT_EQ(console, "") << "the page wrote to the browser console";

  EXPECT_NE(dom.find("data-rendered=\"ok\""), std::string::npos) << "the page's script did not finish";
  EXPECT_EQ(dom.find("data-js-errors=\""), std::string::npos) << "script errors recorded on <body>";
  EXPECT_NE(dom.find("data-bar-groups=\"3\""), std::string::npos) << "the browser did not count 3 bar groups";
  const std::regex group(R"re(<g class="bar-group" data-bench="([^"]+)")re");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), group); it != std::sregex_iterator(); ++it) {
    found.push_back((*it)[1].str());
  }
  EXPECT_EQ(found, benches);
  EXPECT_NE(dom.find("alt=\"split chart of loader\""), std::string::npos);
}

// The results store's page (--store S --history --machines --html): one trend chart per
// benchmark, the failed run marked, scripts run to the end, nothing on the console.
TEST(ReportBrowser, StoreHistoryPageRendersOneTrendChartPerBench) {
  if (access(kChromium, X_OK) != 0) {
    GTEST_SKIP() << kChromium << " is not installed; the store's HTML page was not checked in a browser";
  }
  TempDir tmp;
  for (int r = 0; r < 3; ++r) {
    const fs::path tree = tmp.path() / ("run" + std::to_string(r));
    for (int k = 0; k < 2; ++k) {
      for (const std::string name : {"loader", "toy_reg"}) {
        FakeInstance i;
        i.name = name;
        i.run = k;
        i.items_per_s = 100.0 - 10 * r + k;
        i.nan_loss = name == "toy_reg" && r == 1 && k == 0;  // a failed run, marked on the chart
        i.extra = {{"start_time", "2026-01-0" + std::to_string(r + 1) + "T00:00:00Z"}};
        write_fake_report(tree, i);
      }
    }
    const CommandResult imported = run_command(std::string(MLBENCH_REPORT_BIN) + " --store " +
                                               (tmp.path() / "s.db").string() + " --import " + tree.string());
    ASSERT_EQ(imported.status, 0) << imported.output;
  }
  const fs::path html = tmp.path() / "store.html";
  const CommandResult made =
      run_command(std::string(MLBENCH_REPORT_BIN) + " --store " + (tmp.path() / "s.db").string() +
                  " --history --machines --html " + html.string());
  ASSERT_EQ(made.status, 0) << made.output;
  const BrowserRun run = open_in_chromium(html, tmp.path() / "page");
  ASSERT_EQ(run.status, 0) << "chromium failed:\n" << run.log;
  std::string console;
  std::istringstream lines(run.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  }
  EXPECT_EQ(console, "") << "the page wrote to the browser console";
  EXPECT_NE(run.dom.find("data-rendered=\"ok\""), std::string::npos) << "the page's script did not finish";
  EXPECT_EQ(run.dom.find("data-js-errors=\""), std::string::npos) << "script errors recorded on <body>";
  EXPECT_NE(run.dom.find("data-trend-charts=\"2\""), std::string::npos) << "the browser did not count 2 trend charts";
  EXPECT_NE(run.dom.find("data-failed-runs=\"1\""), std::string::npos) << "the failed run is not marked once";
  const std::regex chart(R"re(<svg [^>]*class="chart trend" data-bench="([^"]+)")re");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(run.dom.begin(), run.dom.end(), chart); it != std::sregex_iterator(); ++it) {
    found.push_back((*it)[1].str());
  }
  EXPECT_EQ(found, (std::vector<std::string>{"loader", "toy_reg"}));
  EXPECT_NE(run.dom.find("<table id=\"machines\">"), std::string::npos);
}

}  // namespace
}  // namespace mlbench::report::testing
