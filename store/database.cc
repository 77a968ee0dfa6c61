// What both back-ends share (database.h).
#include "store/database.h"

#include <regex>

namespace mlbench::store {

std::string redact_url(const std::string& url) {
  // scheme://user:password@rest -> scheme://user:***@rest; and password=... in the query.
  static const std::regex userinfo(R"(^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@?]*):[^@/?]*@)");
  static const std::regex param(R"(([?&]password=)[^&]*)");
  std::string out = std::regex_replace(url, userinfo, "$1:***@");
  return std::regex_replace(out, param, "$1***");
}

}  // namespace mlbench::store
