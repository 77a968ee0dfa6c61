// HTML/XML escaping and base64 (see html.h).
#include "html.h"

#include <openssl/evp.h>

namespace mlbench::core {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string base64(std::string_view bytes) {
  // EVP_EncodeBlock takes an int length; SVG charts are far below 2 GiB.
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // + the NUL it writes
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

}  // namespace mlbench::core
