// The one rule for a path that a dataset's own files name below a root they must stay in: an
// object of an HTTP listing (below the URL's prefix), a member of a tar shard (below the shard),
// an entry of a `.shards` list (below the list's folder). What they say is not trusted: a listing
// naming `../secret.txt` made the loader request /secret.txt from the server. Every such path is
// checked with relative_path_problem before it is used (docs/pipeline.md, "Paths that data names").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mlbench::pipeline {

// A longer path is refused (PATH_MAX: no file system holds one longer).
inline constexpr std::size_t kMaxRelativePathBytes = 4096;

// Why `path` is refused, "" when it is a plain relative path: '/'-separated segments, none of
// them empty, "." or ".."; not absolute; no backslash and no control character (0x00-0x1f,
// 0x7f); no ':' in the first segment (a URL's scheme, `http:`, `file:`; RFC 3986 reads a
// relative path's first segment with a ':' as one); at most kMaxRelativePathBytes. A segment
// whose percent-escapes decode (once, or again and again, as a server or proxy that decodes
// twice would) to a refused one (`%2e%2e`, `%252e%252e`, `a%2fb`, `%00`) is refused too, though
// HttpSource would send its '%' as `%25`: no server then sees a path other than the one listed.
std::string relative_path_problem(std::string_view path);

// `path` for a one-line message, in double quotes: control characters, '"' and '\' as \xNN,
// cut after 200 bytes ("..." then).
std::string quoted_path(std::string_view path);

}  // namespace mlbench::pipeline
