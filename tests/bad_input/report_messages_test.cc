// mlbench-report's reasons (docs/reliability.md, defect 17): a report whose speed is 0,
// negative or not a number says so, instead of "no train_item.avg".
#include <gtest/gtest.h>

#include "report/reports_tree.h"

namespace mlbench::report {
namespace {

nlohmann::json report_with_speed(const nlohmann::json& avg) {
  return {{"name", "b"}, {"suite", "s"}, {"completed", true}, {"train_item", {{"avg", avg}}}};
}

TEST(ReportMessages, AZeroNegativeOrTextSpeedIsDescribedAsItIs) {
  EXPECT_EQ(parse_instance(report_with_speed(0), "f.json").reason, "train_item.avg is 0 (not a positive number)");
  EXPECT_EQ(parse_instance(report_with_speed(-3.5), "f.json").reason, "train_item.avg is -3.5 (not a positive number)");
  EXPECT_EQ(parse_instance(report_with_speed("fast"), "f.json").reason, "train_item.avg is \"fast\" (not a number)");
  EXPECT_EQ(parse_instance(report_with_speed(nullptr), "f.json").reason, "train_item.avg is null (not a number)");
  EXPECT_TRUE(parse_instance(report_with_speed(0), "f.json").failed);
}

TEST(ReportMessages, AMissingSpeedIsStillCalledMissing) {
  nlohmann::json r = report_with_speed(1.0);
  r.erase("train_item");
  EXPECT_EQ(parse_instance(r, "f.json").reason, "no train_item.avg");
  EXPECT_TRUE(parse_instance(report_with_speed(12.5), "f.json").reason.empty());
}

}  // namespace
}  // namespace mlbench::report
