// A build without libpq: a postgresql:// store is one clear error (database.h).
#include <fmt/format.h>

#include "core/credentials.h"
#include "store/database.h"

namespace mlbench::store {

std::unique_ptr<Database> open_postgresql(const std::string& url) {
  throw StoreError(fmt::format("{}: this mlbench was built without PostgreSQL (install libpq-dev and rebuild)",
                               core::mask_credentials(url)));
}

bool postgresql_available() {
  return false;
}

}  // namespace mlbench::store
