// Masking passwords in texts and JSON (see credentials.h). A scanner rather than a regex:
// texts are whole reports, and std::regex recurses per character.
#include "core/credentials.h"

#include <cctype>

#include <nlohmann/json.hpp>

namespace mlbench::core {

namespace {

constexpr std::string_view kMask = "***";

bool ends_a_url_authority(char c) {
  return c == '/' || c == '"' || c == '\'' || c == '`' || std::isspace(static_cast<unsigned char>(c));
}

// Where the URL's user part that starts at `from` (just after "://") ends: the '@' before
// its host; npos when it has none.
std::size_t userinfo_end(std::string_view text, std::size_t from) {
  for (std::size_t i = from; i < text.size(); ++i) {
    if (text[i] == '@') return i;
    if (ends_a_url_authority(text[i])) return std::string_view::npos;
  }
  return std::string_view::npos;
}

bool ends_a_value(char c) {
  return c == '&' || c == ';' || c == '"' || c == '\'' || c == '`' || std::isspace(static_cast<unsigned char>(c));
}

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// The end of the value that starts at `at` (after "password=" and any spaces): a quoted
// value ends after its closing quote (libpq's '...' with \' and \\ escapes), another one
// at the first space, '&', ';' or quote.
std::size_t value_end(std::string_view text, std::size_t at) {
  if (at < text.size() && text[at] == '\'') {
    for (std::size_t i = at + 1; i < text.size(); ++i) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '\'') {
        return i + 1;
      }
    }
    return text.size();
  }
  std::size_t i = at;
  while (i < text.size() && !ends_a_value(text[i])) ++i;
  return i;
}

}  // namespace

std::string mask_credentials(std::string_view text) {
  constexpr std::string_view kKey = "password";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    // scheme://user:PASSWORD@host
    if (text.compare(i, 3, "://") == 0) {
      const std::size_t start = i + 3;
      const std::size_t at = userinfo_end(text, start);
      if (at != std::string_view::npos) {
        const std::size_t colon = text.substr(start, at - start).find(':');
        if (colon != std::string_view::npos && at > start + colon + 1) {
          out.append(text.substr(i, 3 + colon + 1));
          out.append(kMask);
          out.push_back('@');
          i = at + 1;
          continue;
        }
      }
      out.append("://");
      i = start;
      continue;
    }
    // ...password=VALUE (a key that ends in "password", as a whole word's end)
    if (i + kKey.size() <= text.size() && iequals(text.substr(i, kKey.size()), kKey) &&
        (i + kKey.size() == text.size() || !is_key_char(text[i + kKey.size()]))) {
      std::size_t eq = i + kKey.size();
      while (eq < text.size() && text[eq] == ' ') ++eq;
      if (eq < text.size() && text[eq] == '=') {
        std::size_t value = eq + 1;
        while (value < text.size() && text[value] == ' ') ++value;
        const std::size_t end = value_end(text, value);
        out.append(text.substr(i, value - i));
        if (end > value) out.append(kMask);
        i = end;
        continue;
      }
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

void mask_credentials(nlohmann::json& value) {
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.find("://") != std::string::npos || s.find('=') != std::string::npos) value = mask_credentials(s);
  } else if (value.is_structured()) {
    for (auto& item : value) mask_credentials(item);
  }
}

}  // namespace mlbench::core
