#include "sluice/http/http_flags.hpp"

namespace sluice::http {
namespace {

constexpr std::size_t kMaxBodyLimit = 64 << 20;
constexpr unsigned kMaxThreads = 1024;

}  // namespace

Result<std::vector<ListenAddress>> parseListenAddresses(std::string_view text) {
  auto targets = parseListenList(text, ListenListRules{});
  if (!targets) {
    return targets.error();
  }
  std::vector<ListenAddress> list;
  for (ListenTarget& target : *targets) {
    list.push_back(target.unix_socket
                       ? ListenAddress::unixSocket(std::move(target.path))
                       : ListenAddress::tcp(std::move(target.tcp.host), target.tcp.port));
  }
  return list;
}

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addHttpFlags(FlagRegistry& registry, HttpSettings& settings) {
  namespace set = flag_setters;
  using std::chrono::milliseconds;
  registry.section("HTTP");
  registry.add({.name = "listen",
                .metavar = "ADDRESSES",
                .help = "where to serve, comma-separated: HOST:PORT and/or unix:PATH (default "
                        "127.0.0.1:8080)",
                .set = [&settings](std::string_view value) -> Status {
                  auto list = parseListenAddresses(value);
                  if (!list) {
                    return list.error();
                  }
                  settings.listen = std::move(*list);
                  return {};
                },
                .envoy_variables = "HOST, PORT"});
  registry.add({.name = "listen-mode",
                .metavar = "MODE",
                .help = "octal permissions of the unix: sockets of --listen (default 0660)",
                .set = set::fileMode(settings.listen_mode)});
  registry.add({.name = "threads",
                .metavar = "N",
                .help = "I/O threads (default: one per core)",
                .set = set::integer<unsigned>(settings.threads, 1, kMaxThreads)});
  registry.add({.name = "max-body-bytes",
                .metavar = "N",
                .help = "larger request bodies get 413 (default 1048576)",
                .set = set::integer<std::size_t>(settings.max_body_bytes, 1, kMaxBodyLimit)});
  registry.add(
      {.name = "drain-timeout-ms",
       .metavar = "MS",
       .help = "on SIGTERM, how long in-flight requests may finish (default 30000)",
       .set = set::milliseconds(settings.drain_timeout, milliseconds(0), milliseconds(3'600'000))});
  registry.add({.name = "request-timeout-ms",
                .metavar = "MS",
                .help = "a request must arrive whole within this, from its first byte (default "
                        "10000)",
                .set = set::milliseconds(settings.request_timeout, milliseconds(1),
                                         milliseconds(3'600'000))});
  registry.add(
      {.name = "idle-timeout-ms",
       .metavar = "MS",
       .help = "idle keep-alive connections are closed after this (default 60000)",
       .set = set::milliseconds(settings.idle_timeout, milliseconds(1), milliseconds(3'600'000))});
  addForwardAuthFlags(registry, settings.forward_auth);
}

}  // namespace sluice::http
