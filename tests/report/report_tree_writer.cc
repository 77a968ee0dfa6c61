#include "report_tree_writer.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/report_name.h"
#include "tests/support/run_command.h"

namespace mlbench::report::testing {
namespace fs = std::filesystem;

nlohmann::json fake_report(const FakeInstance& i) {
  auto stat = [](double avg) {
    return nlohmann::json{{"avg", avg}, {"min", avg}, {"max", avg}, {"sd", 0.0}, {"count", 40}, {"unit", "s"}};
  };
  nlohmann::json loss = nlohmann::json::array({0.9, 0.5, 0.25});
  if (i.nan_loss) loss.push_back(nullptr);
  const double iteration = i.wait_s + i.h2d_s + i.compute_s;
  nlohmann::json j = {{"name", i.name},
                      {"suite", i.suite},
                      {"run_id", i.run},
                      {"jr_id", i.slot},
                      {"vcd", std::to_string(i.slot)},
                      {"batch_size", 256},
                      {"train", stat(256.0 * 10 / i.items_per_s)},
                      {"train_item",
                       {{"avg", i.items_per_s},
                        {"min", i.items_per_s * 0.9},
                        {"max", i.items_per_s * 1.1},
                        {"range", i.items_per_s * 0.2},
                        {"unit", "items/sec"}}},
                      {"batch_loss", loss},
                      {"completed", i.completed},
                      {"stall",
                       {{"wait", stat(i.wait_s)},
                        {"h2d", stat(i.h2d_s)},
                        {"compute", stat(i.compute_s)},
                        {"iteration", stat(iteration)},
                        {"stall_pct", i.stall_pct ? nlohmann::json(*i.stall_pct) : nlohmann::json()},
                        {"warmup_iterations", 10}}},
                      {"pipeline", nullptr},
                      {"resources", nullptr}};
  if (!i.completed) j["reason"] = "loss is NaN";
  j.update(i.extra);
  return j;
}

fs::path write_fake_report(const fs::path& root, const FakeInstance& i, const std::string& run_dir) {
  const fs::path dir = root / (run_dir.empty() ? "R" + std::to_string(i.run) : run_dir);
  static int tick = 0;  // distinct time stamps, so two reports of one slot never share a name
  const auto when =
      std::chrono::system_clock::time_point() + std::chrono::hours(24 * 365 * 56) + std::chrono::microseconds(++tick);
  const fs::path file = dir / core::report_file_name(i.suite, i.name, i.run, i.slot, i.fail_file, when);
  core::write_json_atomic(file, fake_report(i));
  return file;
}

CommandResult run_command(const std::string& command) {
  const auto r = testing_support::run_command(command);
  return {r.signal != 0 ? -1 : r.exit_code, r.output};
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mlbench::report::testing
