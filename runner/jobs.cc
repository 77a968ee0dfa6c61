// Jobs-file parsing, validation, selection, $VAR and sweep expansion (see jobs.h).
#include "jobs.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

namespace mlbench::runner {

using ojson = nlohmann::ordered_json;

namespace {

std::string where(const std::string& file, int index, const std::string& name, const std::string& field) {
  std::string s = fmt::format("{}: job {}", file, index);
  if (!name.empty()) s += " (" + name + ")";
  if (!field.empty()) s += ": field '" + field + "'";
  return s;
}

// The integer literals of a document that JSON could not hold as integers (beyond 64 bits:
// read as doubles), by their double value: a SAX pass sees each number as written.
class BigIntegerLiterals : public nlohmann::json_sax<ojson> {
 public:
  std::set<double> values;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t v, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos) values.insert(v);  // written as an integer
    return true;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

std::string type_of(const ojson& v) {
  if (v.is_boolean()) return v.dump();
  if (v.is_null()) return "null";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "a list";
  if (v.is_string()) return "a string";
  return "a number";
}

bool scalar(const ojson& v) { return v.is_string() || v.is_number(); }

// A number as a command-line token: integers without a decimal point.
std::string token(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

namespace {

ojson parse_document(const std::string& text, const std::string& file) {
  ojson doc;
  try {
    doc = ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    std::string msg = e.what();
    if (auto p = msg.find("parse error"); p != std::string::npos) msg = msg.substr(p);
    throw JobsError(file + ": not valid JSON: " + msg);
  }
  if (!doc.is_array()) throw JobsError(file + ": expected a JSON array of jobs, got " + type_of(doc));
  if (doc.empty()) throw JobsError(file + ": no jobs in the file");
  return doc;
}

// One job object of a jobs file, read field by field; errors name the file, job and field.
class JobReader {
 public:
  JobReader(const ojson& j, const std::string& file, int index, const std::set<double>& big_integers)
      : j_(j), file_(file), big_integers_(big_integers) {
    job_.index = index;
  }

  JobSpec read(std::set<std::string>& names) {
    if (!j_.is_object()) throw JobsError(where(file_, job_.index, "", "") + ": expected an object, got " + type_of(j_));
    read_name(names);
    check_fields();
    read_command();
    read_args();
    read_options();
    return job_;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw JobsError(where(file_, job_.index, job_.name, field) + ": " + what);
  }

  void read_name(std::set<std::string>& names) {
    if (!j_.contains("name")) fail("name", "missing required field");
    if (!j_["name"].is_string() || j_["name"].get<std::string>().empty()) {
      fail("name", "expected a non-empty string, got " + type_of(j_["name"]));
    }
    const std::string name = j_["name"].get<std::string>();
    job_.name = name;
    if (const std::string why = name_problem(name); !why.empty()) fail("name", why);
    if (!names.insert(name).second) fail("name", "duplicate job name");
  }

  void check_fields() const {
    static const std::set<std::string> known = {"name", "cmd", "args", "cgroup", "timeout", "dataset", "tags"};
    for (const auto& [key, value] : j_.items()) {
      if (!known.count(key)) fail(key, "unknown field");
    }
    for (const char* req : {"cmd", "args"}) {
      if (!j_.contains(req)) fail(req, "missing required field");
    }
  }

  void read_command() {
    if (!j_["cmd"].is_string() || j_["cmd"].get<std::string>().empty()) {
      fail("cmd", "expected a non-empty string, got " + type_of(j_["cmd"]));
    }
    job_.cmd = j_["cmd"].get<std::string>();
  }

  void read_args() {
    if (!j_["args"].is_object()) fail("args", "expected an object of flag: value, got " + type_of(j_["args"]));
    for (const auto& [flag, value] : j_["args"].items()) {
      const std::string f = "args." + flag;
      if (value.is_array()) {
        if (value.empty()) fail(f, "a sweep list must not be empty");
        for (const auto& v : value) {
          if (!scalar(v)) fail(f, "sweep values must be numbers or strings, got " + type_of(v));
          check_exact(f, v);
        }
      } else if (!scalar(value)) {
        fail(f, "expected a number, a string or a list, got " + type_of(value));
      }
      check_exact(f, value);
      job_.args.emplace_back(flag, value);
    }
  }

  // JSON reads an integer literal beyond 64 bits as a double, which would reach the
  // benchmark as "1e+20": refuse it rather than pass a value other than the one
  // written. A number written as a float (1e38, 2.5e19) is passed as one.
  void check_exact(const std::string& field, const ojson& v) const {
    if (!v.is_number_float()) return;
    const double x = v.get<double>();
    if (std::isfinite(x) && big_integers_.count(x) > 0) {
      fail(field, fmt::format("the number {} is too large to pass as written (integers must fit 64 bits); "
                              "quote it as a string to pass it verbatim",
                              v.dump()));
    }
  }

  void read_options() {
    if (j_.contains("cgroup")) {
      const ojson& c = j_["cgroup"];
      if (c != "student" && c != "all") fail("cgroup", "expected \"student\" or \"all\", got " + c.dump());
      job_.cgroup = c == "all" ? CgroupKind::All : CgroupKind::Student;
    }
    if (j_.contains("timeout")) {
      if (!j_["timeout"].is_number() || j_["timeout"].get<double>() <= 0) {
        fail("timeout", "expected a positive number of seconds, got " + j_["timeout"].dump());
      }
      job_.timeout = j_["timeout"].get<double>();
    }
    if (j_.contains("dataset")) {
      if (!j_["dataset"].is_string() || j_["dataset"].get<std::string>().empty()) {
        fail("dataset", "expected a dataset name, got " + type_of(j_["dataset"]));
      }
      job_.dataset = j_["dataset"].get<std::string>();
    }
    if (j_.contains("tags")) {
      if (!j_["tags"].is_array()) fail("tags", "expected a list of strings");
      for (const auto& t : j_["tags"]) {
        if (!t.is_string()) fail("tags", "expected a list of strings");
        job_.tags.push_back(t.get<std::string>());
      }
    }
  }

  const ojson& j_;
  const std::string& file_;
  const std::set<double>& big_integers_;
  JobSpec job_;
};

}  // namespace

std::string name_problem(const std::string& name) {
  if (name.empty()) return "must not be empty";
  if (name == "." || name == "..") return "is not a name ('" + name + "')";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "must not contain control characters (got '" + printable(name) + "')";
  }
  if (name.find_first_of("/ ,\t") != std::string::npos) return "must not contain '/', ',' or spaces";
  return {};
}

std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::vector<JobSpec> parse_jobs(const std::string& text, const std::string& file) {
  const ojson doc = parse_document(text, file);
  BigIntegerLiterals big;
  ojson::sax_parse(text, &big);  // the document parsed above: no error here
  std::vector<JobSpec> jobs;
  std::set<std::string> names;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    jobs.push_back(JobReader(doc[i], file, static_cast<int>(i), big.values).read(names));
  }
  return jobs;
}

std::vector<JobSpec> select_jobs(const std::vector<JobSpec>& jobs, const std::vector<std::string>& names,
                                 const std::vector<std::string>& exclude, const std::string& file) {
  std::set<std::string> all;
  for (const auto& j : jobs) all.insert(j.name);
  for (const auto* list : {&names, &exclude}) {
    for (const auto& n : *list) {
      if (!all.count(n)) {
        throw JobsError(fmt::format("{}: no job named '{}' (given to {}); see --show", file, n,
                                    list == &names ? "--name" : "--exclude"));
      }
    }
  }
  const std::set<std::string> want(names.begin(), names.end()), skip(exclude.begin(), exclude.end());
  std::vector<JobSpec> out;
  for (const auto& j : jobs) {
    if ((want.empty() || want.count(j.name)) && !skip.count(j.name)) out.push_back(j);
  }
  return out;
}

std::string expand_vars(const std::string& text, const std::map<std::string, std::string>& env, const std::string& where) {
  std::string out;
  auto is_name = [](char c, bool first) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)) || (!first && std::isdigit(static_cast<unsigned char>(c))); };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    std::string name;
    std::size_t end = i + 1;
    if (end < text.size() && text[end] == '{') {
      const auto close = text.find('}', end);
      if (close == std::string::npos) throw JobsError(where + ": unclosed ${ in '" + text + "'");
      name = text.substr(end + 1, close - end - 1);
      end = close + 1;
    } else {
      while (end < text.size() && is_name(text[end], end == i + 1)) name += text[end++];
    }
    if (name.empty()) throw JobsError(where + ": '$' without a variable name in '" + text + "' (write $$ for a '$')");
    auto it = env.find(name);
    if (it == env.end()) throw JobsError(where + ": $" + name + " is not set");
    out += it->second;
    i = end - 1;
  }
  return out;
}

std::vector<SweepPoint> sweep_points(const JobSpec& job, const std::map<std::string, std::string>& env,
                                     const std::string& file) {
  std::vector<SweepPoint> points{{}};
  for (const auto& [flag, value] : job.args) {
    const std::string w = where(file, job.index, job.name, "args." + flag);
    const std::string f = expand_vars(flag, env, w);
    auto append = [&](SweepPoint& p, const ojson& v) {
      p.argv.push_back(f);
      if (!(v.is_string() && v.get<std::string>().empty())) p.argv.push_back(expand_vars(token(v), env, w));
    };
    if (!value.is_array()) {
      for (auto& p : points) append(p, value);
      continue;
    }
    std::vector<SweepPoint> next;
    for (const auto& p : points) {
      for (const auto& v : value) {
        SweepPoint q = p;
        append(q, v);
        q.label += (q.label.empty() ? "" : " ") + f + (v.is_string() && v.get<std::string>().empty() ? "" : " " + token(v));
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  return points;
}

}  // namespace mlbench::runner
