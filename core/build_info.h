// The release and the commit a binary was built from (cmake/build_info.cmake writes
// their definitions at build time): the reports' `version` and every command's --version.
#pragma once

namespace mlbench::core::build_info {
extern const char* const kGitCommit;
extern const char* const kVersion;
}  // namespace mlbench::core::build_info
