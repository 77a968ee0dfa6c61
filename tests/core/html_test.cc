#include "core/html.h"

#include <string>

#include <gtest/gtest.h>

namespace mlbench::core {
namespace {

TEST(Html, EscapeReplacesMarkupCharacters) {
  EXPECT_EQ(html_escape("plain name_1.x"), "plain name_1.x");
  EXPECT_EQ(html_escape(""), "");
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(html_escape("&amp;"), "&amp;amp;");          // escaping twice escapes twice
  EXPECT_EQ(html_escape("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

TEST(Html, Base64MatchesRfc4648) {
  // RFC 4648 section 10 test vectors.
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\0\xff\xfe", 3)), "AP/+");
}

TEST(Html, Base64HasNoLineBreaksOnLongInput) {
  const std::string long_input(3000, 'x');
  const std::string out = base64(long_input);
  EXPECT_EQ(out.size(), 4000u);
  EXPECT_EQ(out.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace mlbench::core
