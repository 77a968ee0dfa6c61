// Credentials are never stored or printed (docs/reliability.md, "Trust boundaries"): every
// text mlbench writes that may hold one (a command line, a store's name, a report's runner
// block, machine.json, the logs' headers, the results store's rows) goes through
// mask_credentials first. One function, so that every writer masks the same forms.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::core {

// `text` with every password replaced by "***", the rest kept as it was:
//  - the password of a URL's user part: postgresql://user:PASSWORD@host/db -> postgresql://user:***@host/db;
//  - a key ending in "password" set with '=' (a URL's query, ?password=... or &password=...; libpq's
//    keyword/value conninfo, password=... or password='...'; PGPASSWORD=...), up to the next
//    space, '&', ';' or quote (the closing quote of a quoted value).
// Idempotent: a masked text comes back unchanged.
std::string mask_credentials(std::string_view text);

// Every string in `value` (object keys left alone), masked in place.
void mask_credentials(nlohmann::json& value);

}  // namespace mlbench::core
