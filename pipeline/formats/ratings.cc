#include "pipeline/formats/ratings.h"

#include <charconv>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>

namespace mlbench::pipeline {

namespace {

template <class T>
bool parse_number(std::string_view s, T& out) {
  while (!s.empty() && (s.front() == ' ')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  if (s.empty()) return false;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

}  // namespace

Ratings parse_ratings_csv(std::string_view text, const std::string& name) {
  Ratings r;
  std::unordered_map<std::int64_t, std::int32_t> user_ids, item_ids;
  auto dense = [](std::unordered_map<std::int64_t, std::int32_t>& ids, std::int64_t raw, std::int64_t& n) {
    auto [it, inserted] = ids.emplace(raw, static_cast<std::int32_t>(n));
    if (inserted) ++n;
    return it->second;
  };
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    std::string_view fields[4];
    int n = 0;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = line.find(',', start);
      if (n == 4) {
        n = 5;
        break;
      }
      fields[n++] = line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (n != 4) {
      throw DataError(fmt::format("{}:{}: expected 4 comma-separated fields (userId,movieId,rating,timestamp), got {}",
                                  name, line_no, n == 5 ? std::string("more than 4") : std::to_string(n)));
    }
    std::int64_t user = 0, item = 0, ts = 0;
    double rating = 0;
    if (line_no == 1 && !parse_number(fields[0], user)) continue;  // header
    if (!parse_number(fields[0], user)) throw DataError(fmt::format("{}:{}: userId '{}' is not an integer", name, line_no, fields[0]));
    if (!parse_number(fields[1], item)) throw DataError(fmt::format("{}:{}: movieId '{}' is not an integer", name, line_no, fields[1]));
    if (!parse_number(fields[2], rating)) throw DataError(fmt::format("{}:{}: rating '{}' is not a number", name, line_no, fields[2]));
    if (!parse_number(fields[3], ts)) throw DataError(fmt::format("{}:{}: timestamp '{}' is not an integer", name, line_no, fields[3]));
    r.users.push_back(dense(user_ids, user, r.num_users));
    r.items.push_back(dense(item_ids, item, r.num_items));
  }
  return r;
}

Ratings read_ratings(const std::filesystem::path& path) {
  const auto file = std::filesystem::is_directory(path) ? path / "ratings.csv" : path;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open", file.string()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Ratings r = parse_ratings_csv(text, file.string());
  if (r.users.empty()) throw DataError(fmt::format("{}: no ratings", file.string()));
  return r;
}

}  // namespace mlbench::pipeline
