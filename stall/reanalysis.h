// A finished analysis modelled again (mlbench-stall --reanalyze DIR): the runs its stall.json
// names, read back from their reports, through today's analyzer. What a model change predicts
// from the same measurements, without measuring again (docs/stall.md, "Held out").
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace mlbench::stall {

// DIR/stall.json's runs (each from the report it names; the peer runs and K jobs at once, which
// are several processes each, are left out, so the partitioned what-if falls back to the loopback
// figure), its context (bench, data, items, batch size, cores, iterations, --rounds' rates) and its
// raw storage rates, analysed again. The result is a stall.json of today's schema with
// `reanalysis` = {"of": the file, "schema_version": its version, "left_out": [labels]}; its
// `rounds` and `exec` blocks are carried over. Throws std::runtime_error naming the file and what
// is missing or unreadable.
nlohmann::json reanalyze(const std::filesystem::path& dir);

}  // namespace mlbench::stall
