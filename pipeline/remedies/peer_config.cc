#include "pipeline/remedies/peer_config.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/cli.h"

namespace mlbench::pipeline {

std::string load_peer_secret() {
  if (const char* v = std::getenv("MLBENCH_PEER_SECRET"); v && *v) return v;
  namespace fs = std::filesystem;
  fs::path file;
  if (const char* f = std::getenv("MLBENCH_PEER_SECRET_FILE"); f && *f) {
    file = f;
  } else {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if ((!xdg || !*xdg) && (!home || !*home)) {
      throw std::invalid_argument(
          "--peers: no shared secret: set MLBENCH_PEER_SECRET (the same on every node) or MLBENCH_PEER_SECRET_FILE");
    }
    file = (xdg && *xdg ? fs::path(xdg) : fs::path(home) / ".config") / "mlbench" / "peer-secret";
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    // Made once, 0600, never overwritten: written whole to a temporary file, then linked to its
    // name (link fails when another process made it first; both then read the same whole file).
    if (!fs::exists(file, ec)) {
      std::string tmp = file.string() + ".XXXXXX";
      const int fd = ::mkstemp(tmp.data());  // mode 0600
      if (fd < 0) {
        throw std::invalid_argument(
            fmt::format("--peers: cannot make the shared secret {}: {}", file.string(), std::strerror(errno)));
      }
      const std::string hex = core::random_hex(32) + "\n";
      const bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) && ::fsync(fd) == 0;
      ::close(fd);
      if (ok) (void)::link(tmp.c_str(), file.c_str());  // EEXIST: another process's is the one
      ::unlink(tmp.c_str());
      if (!ok) throw std::invalid_argument("--peers: cannot write the shared secret " + file.string());
    }
  }
  // O_NONBLOCK: a FIFO at the path must not hang the start (it is refused below as no file).
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw std::invalid_argument(
        fmt::format("--peers: cannot read the shared secret {}: {}", file.string(), std::strerror(errno)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::invalid_argument(
        fmt::format("--peers: the shared secret {} is {}, not a file: give the path of a "
                    "file that holds the secret",
                    file.string(), S_ISDIR(st.st_mode) ? "a directory" : "a special file"));
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    throw std::invalid_argument(fmt::format(
        "--peers: the shared secret {} must belong to this user and be readable by no one else (chmod 600 it)",
        file.string()));
  }
  std::string text(4096, '\0');
  const ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) throw std::invalid_argument("--peers: the shared secret " + file.string() + " is empty");
  return text;
}

std::vector<PeerAddress> parse_peers(const std::string& text) {
  std::vector<PeerAddress> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t colon = entry.rfind(':');
    if (entry.empty() || colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
      throw std::invalid_argument(fmt::format("--peers: '{}' is not host:port", entry));
    }
    std::string host = entry.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port_text = entry.substr(colon + 1);
    long port = -1;
    const char* end = port_text.data() + port_text.size();
    const auto [stop, err] = std::from_chars(port_text.data(), end, port);
    if (err != std::errc() || stop != end || port < 1 || port > 65535) {
      throw std::invalid_argument(fmt::format("--peers: '{}' has no port in 1..65535", entry));
    }
    for (std::size_t r = 0; r < out.size(); ++r) {
      if (out[r].host == host && out[r].port == port) {
        throw std::invalid_argument(
            fmt::format("--peers: '{}' is given twice (ranks {} and {}): every node needs an address of its own", entry,
                        r, out.size()));
      }
    }
    out.push_back({host, static_cast<std::uint16_t>(port)});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string peers_text(const std::vector<PeerAddress>& peers) {
  std::string out;
  for (const auto& p : peers) out += (out.empty() ? "" : ",") + p.to_string();
  return out;
}

}  // namespace mlbench::pipeline
