// The process environment as a map (see environment.h).
#include "environment.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

extern char** environ;

namespace mlbench::core {

Environment parse_environment(const char* const* entries) {
  Environment env;
  for (const char* const* e = entries; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Environment current_environment() { return parse_environment(environ); }

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

int env_int(const std::string& var, const std::string& text, int min_value) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < min_value) {
    throw std::invalid_argument("environment variable " + var + "='" + text + "' is not an integer >= " +
                                std::to_string(min_value));
  }
  return value;
}

}  // namespace mlbench::core
