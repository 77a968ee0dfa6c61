// Jobs files (Contract 2): parsing and validation with one-line errors that
// name the file, the job and the field; $VAR expansion; sweep expansion;
// --name/--exclude selection. Pure: the caller reads the file and passes the
// environment in.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::runner {

// A bad jobs file; what() is the one line to print.
class JobsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class CgroupKind { Student, All };

struct JobSpec {
  int index = 0;  // position in the file, from 0
  std::string name;
  std::string cmd;
  // Flag -> value in file order: a string, a number, "" (bare flag) or a list (sweep).
  std::vector<std::pair<std::string, nlohmann::ordered_json>> args;
  CgroupKind cgroup = CgroupKind::Student;
  std::optional<double> timeout;  // seconds
  std::optional<std::string> dataset;
  std::vector<std::string> tags;
};

// Parses a jobs file's text. `file` names it in errors:
// "configs/x.json: job 2 (loader): field 'args.--workers': expected a number, a string or a list, got true".
std::vector<JobSpec> parse_jobs(const std::string& text, const std::string& file);

// What is wrong with a job's or a suite's name, "" when nothing: both name files and
// folders of the run (so no '/', no "." or ".."), Slurm jobs and report lines (so no
// ',', blank or control character).
std::string name_problem(const std::string& name);
// `text` with its control characters written as \xNN, for an error line.
std::string printable(const std::string& text);

// Jobs named in `names` (all when empty) minus those in `exclude`, in file order.
// An unknown name in either list is an error naming it.
std::vector<JobSpec> select_jobs(const std::vector<JobSpec>& jobs, const std::vector<std::string>& names,
                                 const std::vector<std::string>& exclude, const std::string& file);

// "$VAR" and "${VAR}" from `env`; "$$" is a literal '$'. Unset variables throw JobsError
// with `where` ("configs/x.json: job 2 (loader): field 'args.--data'").
std::string expand_vars(const std::string& text, const std::map<std::string, std::string>& env, const std::string& where);

// One point of a sweep: the argument vector for the benchmark and a short label
// of the swept values ("--batch-size 64", "" when the job sweeps nothing).
struct SweepPoint {
  std::vector<std::string> argv;
  std::string label;
};

// The cartesian product of the job's list-valued args, first list varying slowest,
// with $VARS expanded. A job without lists has one point.
std::vector<SweepPoint> sweep_points(const JobSpec& job, const std::map<std::string, std::string>& env,
                                     const std::string& file);

// "a,b,,c" -> {"a","b","c"}
std::vector<std::string> split_list(const std::string& text);

}  // namespace mlbench::runner
