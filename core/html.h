// Text put into HTML and SVG (XML) documents: escaping of text and attribute
// values, and base64 for data: URIs. The report's HTML page and SVG charts and
// mlbench-stall's SVG charts all use these.
#pragma once

#include <string>
#include <string_view>

namespace mlbench::core {

// Replaces & < > " ' by entities, so that `text` is safe as HTML or XML
// character data and inside an attribute quoted with either quote.
std::string html_escape(std::string_view text);

// Standard base64 (RFC 4648, '+' '/' and '=' padding, no line breaks).
std::string base64(std::string_view bytes);

}  // namespace mlbench::core
