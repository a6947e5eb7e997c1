#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/child_process.hpp"

/// A real Prometheus server (Debian's `prometheus` package) for tests.
namespace sluice::test {

struct PrometheusOptions {
  /// host:port targets of one scrape job "sluice" (path /metrics).
  std::vector<std::string> targets;
  /// Rule files (absolute paths) loaded through `rule_files`.
  std::vector<std::string> rule_files;
  std::chrono::milliseconds scrape_interval{500};
  std::chrono::milliseconds evaluation_interval{500};
  std::chrono::milliseconds start_timeout{30'000};
};

/// `prometheus` on a free loopback port with a temporary storage directory and a generated
/// configuration. The constructor waits until /-/ready answers 200 (throws
/// std::runtime_error with the server's log otherwise); the destructor stops it (SIGTERM,
/// then SIGKILL after 10 s) and removes the directory.
class PrometheusServer {
 public:
  explicit PrometheusServer(PrometheusOptions options);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string log() const { return process_ ? process_->output() : std::string(); }

  /// GET on the HTTP API, e.g. get("/api/v1/targets"): status and body.
  std::pair<int, std::string> get(const std::string& target) const;

  /// GET /api/v1/query?query=<expr> (instant query at the server's now): the body.
  std::string query(const std::string& expr) const;

 private:
  PrometheusOptions options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

/// The executable `name` found on PATH ("" when there is none).
std::string findOnPath(const std::string& name);

/// `prometheus` and `promtool` are both on PATH.
bool havePrometheus();

/// Percent-encodes a query-string value (RFC 3986 unreserved characters stay).
std::string urlEncode(const std::string& value);

}  // namespace sluice::test
