// A cursor over one JSON object of a typed record (core/instance_report.h, core/stall_record.h)
// that knows its path in the file, so that a field of the wrong type is one error naming it:
// "train_item.avg is "fast" (not a number)". Absent and null fields leave the output as it was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace mlbench::core::json_fields {

using json = nlohmann::json;

// "train_item.avg is "fast" (not a number)": the field, its value as written (cut at 40
// characters) and what it should have been.
inline ReportFormatError wrong_type(const std::string& path, const json& v, const char* expected) {
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  return ReportFormatError(fmt::format("{} is {} (not {})", path, shown, expected));
}

// The fields of one JSON object at `path` ("" for the report itself).
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  std::string at(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void wrong(const char* key, const char* expected, const json& v) const {
    throw wrong_type(at(key), v, expected);
  }
  // The value at `key`, or nullptr when absent or null.
  const json* find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  void number(const char* key, std::optional<double>& out) const {
    if (const json* v = find(key)) {
      if (!v->is_number()) wrong(key, "a number", *v);
      out = v->get<double>();
    }
  }
  void number(const char* key, double& out) const {
    std::optional<double> v;
    number(key, v);
    if (v) out = *v;
  }
  void integer(const char* key, std::optional<std::int64_t>& out) const {
    if (const json* v = find(key)) {
      if (!v->is_number_integer()) wrong(key, "an integer", *v);
      out = v->get<std::int64_t>();
    }
  }
  void integer(const char* key, std::int64_t& out) const {
    std::optional<std::int64_t> v;
    integer(key, v);
    if (v) out = *v;
  }
  void text(const char* key, std::string& out) const {
    if (const json* v = find(key)) {
      if (!v->is_string()) wrong(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void text(const char* key, std::optional<std::string>& out) const {
    if (const json* v = find(key)) {
      if (!v->is_string()) wrong(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void flag(const char* key, std::optional<bool>& out) const {
    if (const json* v = find(key)) {
      if (!v->is_boolean()) wrong(key, "true or false", *v);
      out = v->get<bool>();
    }
  }
  void flag(const char* key, bool& out) const {
    std::optional<bool> v;
    flag(key, v);
    if (v) out = *v;
  }
  // The object at `key` as fields of its own (absent or null: nullopt).
  std::optional<Fields> sub(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong(key, "an object", *v);
    return Fields(*v, at(key));
  }
  // An object block read by `read` into `out` (absent or null: left nullopt).
  template <class T, class Read>
  void block(const char* key, std::optional<T>& out, Read read) const {
    if (const auto b = sub(key)) {
      T t{};
      read(*b, t);
      out = std::move(t);
    }
  }
  template <class Each>
  void array(const char* key, Each each) const {
    if (const json* v = find(key)) {
      if (!v->is_array()) wrong(key, "an array", *v);
      for (std::size_t i = 0; i < v->size(); ++i) each((*v)[i], fmt::format("{}[{}]", at(key), i));
    }
  }
  // Each element of the array at `key`, an object, as fields: each(fields).
  template <class Each>
  void objects(const char* key, Each each) const {
    array(key, [&](const json& v, const std::string& path) {
      if (!v.is_object()) throw wrong_type(path, v, "an object");
      each(Fields(v, path));
    });
  }
  // Each member of the object at `key`, an object, as fields: each(name, fields).
  template <class Each>
  void members(const char* key, Each each) const {
    if (const auto m = sub(key)) {
      for (const auto& [name, v] : m->object().items()) {
        const std::string path = m->at(name.c_str());
        if (!v.is_object()) throw wrong_type(path, v, "an object");
        each(name, Fields(v, path));
      }
    }
  }
  const json& object() const { return j_; }

 private:
  const json& j_;
  std::string path_;
};

}  // namespace mlbench::core::json_fields
