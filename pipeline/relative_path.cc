#include "pipeline/relative_path.h"

#include <optional>

#include <fmt/format.h>

namespace mlbench::pipeline {

namespace {

// Rounds of percent-decoding checked: a segment that still changes after this many is refused.
constexpr int kDecodeRounds = 4;
constexpr std::size_t kQuotedBytes = 200;

bool is_control(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `s` with each %XX decoded (a '%' not followed by two hex digits stays); nullopt when nothing changed.
std::optional<std::string> percent_decoded(std::string_view s) {
  std::string out;
  bool changed = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
      changed = true;
    } else {
      out += s[i];
    }
  }
  if (!changed) return std::nullopt;
  return out;
}

// Why one segment (no '/' in it, as listed) is refused, "" when it is not.
std::string segment_problem(std::string_view segment) {
  if (segment.empty()) return "an empty segment (a doubled, leading or trailing '/')";
  if (segment == "." || segment == "..") return fmt::format("a '{}' segment", segment);
  for (const char ch : segment) {
    if (ch == '\\') return "a backslash";
    if (is_control(static_cast<unsigned char>(ch))) {
      return fmt::format("a control character (\\x{:02x})", static_cast<unsigned char>(ch));
    }
  }
  return "";
}

}  // namespace

std::string relative_path_problem(std::string_view path) {
  if (path.empty()) return "an empty path";
  if (path.size() > kMaxRelativePathBytes) {
    return fmt::format("{} bytes long, more than {}", path.size(), kMaxRelativePathBytes);
  }
  if (path.front() == '/') return "an absolute path (it must be relative)";
  std::size_t begin = 0;
  for (bool first = true;; first = false) {
    const std::size_t end = std::min(path.find('/', begin), path.size());
    const std::string_view segment = path.substr(begin, end - begin);
    if (std::string why = segment_problem(segment); !why.empty()) return why;
    if (first && segment.find(':') != std::string_view::npos) {
      return "a ':' in its first segment (a URL, or read as one: it must be a relative path)";
    }
    std::string decoded(segment);
    for (int round = 0; round < kDecodeRounds; ++round) {
      auto next = percent_decoded(decoded);
      if (!next) break;
      decoded = std::move(*next);
      std::string why = decoded.find('/') != std::string::npos ? "a '/'" : segment_problem(decoded);
      if (first && why.empty() && decoded.find(':') != std::string::npos) why = "a ':' in its first segment";
      if (!why.empty()) {
        return fmt::format("a segment whose percent-escapes decode to {} ({})", why, quoted_path(decoded));
      }
      if (round + 1 == kDecodeRounds && percent_decoded(decoded)) {
        return fmt::format("a segment still percent-encoded after {} decodings", kDecodeRounds);
      }
    }
    if (end == path.size()) return "";
    begin = end + 1;
  }
}

std::string quoted_path(std::string_view path) {
  std::string out = "\"";
  for (std::size_t i = 0; i < path.size() && i < kQuotedBytes; ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (is_control(c) || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (path.size() > kQuotedBytes) out += "...";
  return out + "\"";
}

}  // namespace mlbench::pipeline
