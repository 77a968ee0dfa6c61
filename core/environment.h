// The process environment as a map: what a child process is given (the runner's
// instances, the analyzer's runs) and what the benchmark CLI reads its defaults from.
#pragma once

#include <map>
#include <string>

namespace mlbench::core {

using Environment = std::map<std::string, std::string>;

// NAME=value entries of a null-terminated array (as `environ`); entries without '=' are
// skipped, and a repeated name keeps its first value (what getenv returns).
Environment parse_environment(const char* const* entries);

// This process's environment, read now.
Environment current_environment();

// The variable's value, or `fallback` when it is unset or empty.
std::string getenv_or(const char* name, const std::string& fallback);

// `text`, the value of the environment variable `var`, as an integer >= `min_value`;
// throws std::invalid_argument naming the variable and its value otherwise.
int env_int(const std::string& var, const std::string& text, int min_value);

}  // namespace mlbench::core
