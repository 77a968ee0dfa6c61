#include "core/byte_size.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace mlbench::core {
namespace {

TEST(ByteSize, PlainBytesAndBinaryUnits) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("17B"), 17u);
  EXPECT_EQ(parse_byte_size("64K"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64KiB"), 64u << 10);
  EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("3T"), 3ull << 40);
  EXPECT_EQ(parse_byte_size("3TiB"), 3ull << 40);
}

TEST(ByteSize, DecimalUnitsAndFractions) {
  EXPECT_EQ(parse_byte_size("500MB"), 500'000'000u);
  EXPECT_EQ(parse_byte_size("2KB"), 2000u);
  EXPECT_EQ(parse_byte_size("1GB"), 1'000'000'000u);
  EXPECT_EQ(parse_byte_size("1TB"), 1'000'000'000'000u);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("0.5K"), 512u);
  EXPECT_EQ(parse_byte_size("1.7"), 1u);  // rounded down to whole bytes
}

TEST(ByteSize, BadInputThrowsNamingTheText) {
  for (const char* bad :
       {"", "abc", "G", "12X", "2 G", " 2G", "+2G", "2g", "2Gi", "inf", "nan", "1e400", "-1", "-2G", "99999999T"}) {
    try {
      parse_byte_size(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(ByteSize, UnknownUnitSaysWhichUnitsExist) {
  try {
    parse_byte_size("12X");
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown size unit 'X'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlbench::core
