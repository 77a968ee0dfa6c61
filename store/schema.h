// The store's schema and its versioned migrations (docs/report.md, "The results store").
#pragma once

#include <string>
#include <vector>

#include "store/database.h"

namespace mlbench::store {

// Migration k (1-based) brings a store from version k-1 to k; portable SQL that both
// SQLite and PostgreSQL run.
const std::vector<std::string>& migrations();

// The store's version: 0 for an empty database (no mlbench_schema table). A schema table
// that is missing, empty or says version 0 beside mlbench's tables, or says a version below
// 0 or no number, throws StoreError: one line saying what is wrong and what to do; only when a
// second reading sees it too, since one that raced with another writer creating the store can
// see its tables without its schema table (its checks are statements of their own).
int read_schema_version(Database& db);

// Brings the store to `target` (kStoreSchemaVersion) in one write transaction. A store
// newer than `target` throws StoreError: "<store>: its schema is version N, newer than
// this mlbench's (M); use a newer mlbench". Access::kReadOnly migrates nothing: a store
// below `target` throws StoreError saying so.
void migrate(Database& db, int target, Access access = Access::kReadWrite);

}  // namespace mlbench::store
