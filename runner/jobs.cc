// Jobs-file parsing, validation, selection, $VAR and sweep expansion (see jobs.h).
#include "jobs.h"

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

std::vector<JobSpec> parse_jobs(const std::string& text, const std::string& file) {
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
  std::vector<JobSpec> jobs;
  std::set<std::string> names;
  static const std::set<std::string> known = {"name", "cmd", "args", "cgroup", "timeout", "dataset", "tags"};
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const ojson& j = doc[i];
    const int idx = static_cast<int>(i);
    if (!j.is_object()) throw JobsError(where(file, idx, "", "") + ": expected an object, got " + type_of(j));
    JobSpec job;
    job.index = idx;
    if (!j.contains("name")) throw JobsError(where(file, idx, "", "name") + ": missing required field");
    if (!j["name"].is_string() || j["name"].get<std::string>().empty()) {
      throw JobsError(where(file, idx, "", "name") + ": expected a non-empty string, got " + type_of(j["name"]));
    }
    job.name = j["name"].get<std::string>();
    for (char c : job.name) {
      if (c == '/' || c == ' ' || c == ',') {
        throw JobsError(where(file, idx, job.name, "name") + ": must not contain '/', ',' or spaces");
      }
    }
    if (!names.insert(job.name).second) throw JobsError(where(file, idx, job.name, "name") + ": duplicate job name");
    for (const auto& [key, value] : j.items()) {
      if (!known.count(key)) throw JobsError(where(file, idx, job.name, key) + ": unknown field");
    }
    for (const char* req : {"cmd", "args"}) {
      if (!j.contains(req)) throw JobsError(where(file, idx, job.name, req) + ": missing required field");
    }
    if (!j["cmd"].is_string() || j["cmd"].get<std::string>().empty()) {
      throw JobsError(where(file, idx, job.name, "cmd") + ": expected a non-empty string, got " + type_of(j["cmd"]));
    }
    job.cmd = j["cmd"].get<std::string>();
    if (!j["args"].is_object()) {
      throw JobsError(where(file, idx, job.name, "args") + ": expected an object of flag: value, got " + type_of(j["args"]));
    }
    for (const auto& [flag, value] : j["args"].items()) {
      const std::string f = "args." + flag;
      if (value.is_array()) {
        if (value.empty()) throw JobsError(where(file, idx, job.name, f) + ": a sweep list must not be empty");
        for (const auto& v : value) {
          if (!scalar(v)) {
            throw JobsError(where(file, idx, job.name, f) + ": sweep values must be numbers or strings, got " + type_of(v));
          }
        }
      } else if (!scalar(value)) {
        throw JobsError(where(file, idx, job.name, f) + ": expected a number, a string or a list, got " + type_of(value));
      }
      job.args.emplace_back(flag, value);
    }
    if (j.contains("cgroup")) {
      const ojson& c = j["cgroup"];
      if (c == "student") {
        job.cgroup = CgroupKind::Student;
      } else if (c == "all") {
        job.cgroup = CgroupKind::All;
      } else {
        throw JobsError(where(file, idx, job.name, "cgroup") + ": expected \"student\" or \"all\", got " + c.dump());
      }
    }
    if (j.contains("timeout")) {
      if (!j["timeout"].is_number() || j["timeout"].get<double>() <= 0) {
        throw JobsError(where(file, idx, job.name, "timeout") + ": expected a positive number of seconds, got " +
                        j["timeout"].dump());
      }
      job.timeout = j["timeout"].get<double>();
    }
    if (j.contains("dataset")) {
      if (!j["dataset"].is_string() || j["dataset"].get<std::string>().empty()) {
        throw JobsError(where(file, idx, job.name, "dataset") + ": expected a dataset name, got " + type_of(j["dataset"]));
      }
      job.dataset = j["dataset"].get<std::string>();
    }
    if (j.contains("tags")) {
      if (!j["tags"].is_array()) throw JobsError(where(file, idx, job.name, "tags") + ": expected a list of strings");
      for (const auto& t : j["tags"]) {
        if (!t.is_string()) throw JobsError(where(file, idx, job.name, "tags") + ": expected a list of strings");
        job.tags.push_back(t.get<std::string>());
      }
    }
    jobs.push_back(std::move(job));
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
