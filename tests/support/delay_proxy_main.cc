// mlbench-delay-proxy: a TCP proxy on 127.0.0.1 that adds a fixed latency to each
// request sent through it (tests/support/delay_proxy.h, NOTE [Latency without
// netem]), for the studies that measure the loader over HTTP at 2 ms and 20 ms of
// latency. Runs until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "core/atomic_file.h"
#include "core/cli.h"
#include "tests/support/delay_proxy.h"

namespace {

constexpr const char* kName = "mlbench-delay-proxy";

// "HOST:PORT" (the last ':' splits, so "[::1]:80" and "::1:80" work too) -> host, port; false when malformed.
bool split_host_port(const std::string& text, std::string* host, int* port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, *port);
  return ec == std::errc() && end == last && *port >= 1 && *port <= 65535;
}

}  // namespace

int main(int argc, char** argv) {
  std::string upstream, port_file;
  double delay_ms = 0;
  int listen_port = 0;
  CLI::App app{
      "mlbench-delay-proxy: forwards TCP connections on 127.0.0.1 to an upstream server, holding every chunk the "
      "client sends for --delay-ms first, so each HTTP/1.1 request pays that much more latency (this kernel has no "
      "netem qdisc). Runs until SIGINT or SIGTERM. Docs: docs/reliability.md, \"Servers in the HTTP tests\"",
      kName};
  app.add_option("--upstream", upstream, "The server to forward to, HOST:PORT (e.g. 127.0.0.1:8080)")->required();
  app.add_option("--delay-ms", delay_ms, "Latency added to each chunk the client sends, in milliseconds (e.g. 2, 20)")
      ->required()
      ->check(mlbench::core::number_in(0, 3600e3));
  app.add_option("--listen-port", listen_port, "Port to listen on at 127.0.0.1 (0: a free one)")
      ->check(mlbench::core::integer_in(0, 65535))
      ->capture_default_str();
  app.add_option("--port-file", port_file, "Write the port listened on to this file (once listening)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << kName << ": error: " << mlbench::core::parse_error_line(e) << " (see --help)" << std::endl;
    return 2;
  }
  std::string host;
  int upstream_port = 0;
  if (!split_host_port(upstream, &host, &upstream_port)) {
    std::cerr << kName << ": error: --upstream '" << upstream << "' is not HOST:PORT (e.g. 127.0.0.1:8080)"
              << std::endl;
    return 2;
  }

  // Blocked before the proxy's threads start, so that they inherit the mask and
  // the signals reach sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const auto delay = std::chrono::microseconds(std::llround(delay_ms * 1000));
  std::unique_ptr<mlbench::testing::DelayProxy> proxy;
  try {
    proxy = std::make_unique<mlbench::testing::DelayProxy>(host, upstream_port, delay, listen_port);
    if (!port_file.empty()) {
      mlbench::core::AtomicFile f(port_file);
      f.write(std::to_string(proxy->port()) + "\n");
      f.commit(mlbench::core::Durability::kNoFsync);
    }
  } catch (const std::exception& e) {
    std::cerr << kName << ": error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "listening on 127.0.0.1:" << proxy->port() << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  proxy.reset();
  return 0;
}
