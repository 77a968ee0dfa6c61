// The process environment as a map (see environment.h).
#include "environment.h"

#include <cstdlib>

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

}  // namespace mlbench::core
