// core::mask_credentials: every form of a password mlbench may be handed (a URL's user part,
// a URL's query, libpq's keyword/value conninfo, an environment assignment) is masked, and the
// rest of the text is kept.
#include "core/credentials.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

TEST(MaskCredentials, AUrlKeepsEverythingButItsPassword) {
  EXPECT_EQ(mask_credentials("postgresql://user:s3cr%40t@db.example:5432/results?sslmode=require"),
            "postgresql://user:***@db.example:5432/results?sslmode=require");
  EXPECT_EQ(mask_credentials("postgresql://mlbench:pw@/results?host=/tmp/pg&password=pw&sslmode=disable"),
            "postgresql://mlbench:***@/results?host=/tmp/pg&password=***&sslmode=disable");
  EXPECT_EQ(mask_credentials("postgres://u@host/db?password=x"), "postgres://u@host/db?password=***");
  EXPECT_EQ(mask_credentials("https://user:tok@example.com/data/train"), "https://user:***@example.com/data/train");
}

TEST(MaskCredentials, KeywordValueConninfoAndAssignments) {
  EXPECT_EQ(mask_credentials("host=/run/pg user=mlbench password=hunter2 dbname=x"),
            "host=/run/pg user=mlbench password=*** dbname=x");
  EXPECT_EQ(mask_credentials("host=db password = 'with space\\'s' dbname=x"), "host=db password = *** dbname=x");
  EXPECT_EQ(mask_credentials("PGPASSWORD=hunter2 mlbench-run"), "PGPASSWORD=*** mlbench-run");
  EXPECT_EQ(mask_credentials("mlbench-run --store 'postgresql://a:b@h/d' --jobs x.json"),
            "mlbench-run --store 'postgresql://a:***@h/d' --jobs x.json");
}

TEST(MaskCredentials, TextWithoutAPasswordIsUnchangedAndMaskingTwiceIsMaskingOnce) {
  for (const std::string text :
       {"postgresql://host:5432/db", "postgresql://user@host/db", "/data/train/class0/img.jpg", "a=b c=d",
        "passwordless=yes password_file=/x --password-file=/y", "https://example.com/a:b/c@d", ""}) {
    EXPECT_EQ(mask_credentials(text), text);
  }
  const std::string once = mask_credentials("postgresql://u:p@h/d?password=p host=x password='q'");
  EXPECT_EQ(mask_credentials(once), once);
}

TEST(MaskCredentials, EveryStringOfAJsonDocument) {
  nlohmann::json j = {{"runner", {{"command", "bench --store postgresql://u:pw@h/d"}}},
                      {"args", {{"--data", "https://u:pw@example.com/x"}, {"--n", 3}}},
                      {"list", {"password=pw", "plain"}}};
  mask_credentials(j);
  EXPECT_EQ(j["runner"]["command"], "bench --store postgresql://u:***@h/d");
  EXPECT_EQ(j["args"]["--data"], "https://u:***@example.com/x");
  EXPECT_EQ(j["args"]["--n"], 3);
  EXPECT_EQ(j["list"][0], "password=***");
  EXPECT_EQ(j["list"][1], "plain");
}

}  // namespace
}  // namespace mlbench::core
