// The numeric validators every command uses (docs/reliability.md, defects 15, 18, 20):
// one line naming the flag, the rule and the value given.
#include <gtest/gtest.h>

#include "core/cli.h"

namespace mlbench::core {
namespace {

// Parses `args` against one option checked by `validator`; returns the error line ("" when valid).
template <class T>
std::string error_of(const CLI::Validator& validator, const std::string& value) {
  CLI::App app("t", "t");
  T var{};
  app.add_option("--value,-v", var, "v")->check(validator);
  const std::string flag = "--value";
  const char* argv[] = {"t", flag.c_str(), value.c_str()};
  try {
    app.parse(3, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error_line(e);
  }
  return {};
}

TEST(CliChecks, ZeroForAPositiveNumberNamesFlagRuleAndValue) {
  EXPECT_EQ(error_of<double>(number_above(0), "0"), "--value must be > 0 (got 0)");
  EXPECT_EQ(error_of<double>(number_above(0), "-5"), "--value must be > 0 (got -5)");
  EXPECT_EQ(error_of<double>(number_above(0), "0.5"), "");
}

TEST(CliChecks, NotANumberIsNotCalledOutOfRange) {
  EXPECT_EQ(error_of<double>(number_above(0), "abc"), "--value must be a number (got abc)");
  EXPECT_EQ(error_of<double>(number_above(0), "nan"), "--value must be a number (got nan)");
  EXPECT_EQ(error_of<int>(integer_at_least(1), "abc"), "--value must be an integer (got abc)");
  EXPECT_EQ(error_of<int>(integer_at_least(1), "2.5"), "--value must be an integer (got 2.5)");
  EXPECT_EQ(error_of<int>(integer_at_least(1), "1e+20"), "--value must be an integer (got 1e+20)");
}

TEST(CliChecks, RangeMessagesCarryNoThreeHundredDigitNumber) {
  EXPECT_EQ(error_of<int>(integer_at_least(1), "0"), "--value must be >= 1 (got 0)");
  EXPECT_EQ(error_of<int>(integer_in(1, 100), "101"), "--value must be <= 100 (got 101)");
  EXPECT_EQ(error_of<double>(number_in(0.0, 1.0), "1.5"), "--value must be <= 1 (got 1.5)");
  EXPECT_EQ(error_of<double>(number_in(0.0, 1.0), "-0.1"), "--value must be >= 0 (got -0.1)");
  // Larger than an int: refused before CLI11's conversion wraps or fails.
  EXPECT_EQ(error_of<int>(integer_at_least(0), "99999999999"), "--value must be <= 2147483647 (got 99999999999)");
  EXPECT_EQ(error_of<int>(integer_at_least(0), "99999999999999999999999"),
            "--value must be <= 2147483647 (got 99999999999999999999999)");
}

TEST(CliChecks, NumbersBeyondAFloatAreRefusedByName) {
  // --lr 1e300 used to end in LibTorch's "value cannot be converted to type float without overflow".
  EXPECT_EQ(error_of<double>(number_above(0), "1e300"), "--value must be <= 3.40282e+38 (got 1e300)");
  EXPECT_EQ(error_of<double>(number_above(0), "1e400"), "--value must be <= 3.40282e+38 (got 1e400)");
  EXPECT_EQ(error_of<double>(number_above(0), "inf"), "--value must be <= 3.40282e+38 (got inf)");
  EXPECT_EQ(error_of<double>(number_above(0), "1e38"), "");
}

}  // namespace
}  // namespace mlbench::core
