#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/logging.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"

namespace spdlog {
class logger;
namespace details {
class thread_pool;
}
}  // namespace spdlog

namespace sluice::app {

/// One decision as the access log records it.
struct AccessRecord {
  Micros time_us =
      0;  ///< when the limits were evaluated (JSON lines; plain lines use the log time)
  /// The request (descriptors, hits, per-descriptor hits and limits: the JSON line carries
  /// them, so that `sluice simulate` can replay it); null: only domain and client.
  const DecisionRequest* request = nullptr;
  std::string_view rules_hash;  ///< the RuleSet's hash ("" when no rules were loaded)
  std::string_view domain;
  std::string_view client;    ///< the request's clientId ("" when none)
  std::string_view rule;      ///< the binding limit's name ("" when no limit was evaluated)
  std::string_view decision;  ///< allowed, denied, shadow_denied, no_rule, unknown_domain, error
  bool degraded = false;      ///< answered by the store's failure mode
  Micros latency_us = 0;      ///< from decide() to its answer
};

/// The text of one record, without newline. Plain (after the logger's timestamp):
/// `domain="auth" client="u1" rule="login" decision=denied degraded=false latency_us=153`;
/// JSON: the whole replayable line of docs/what-if.md ("The log"), whose "time" is
/// `time_us` with microseconds.
std::string formatAccessRecord(const AccessRecord& record, LogFormat format);

/// The optional access log (`--access-log PATH`, "-" for stdout): one line per decision,
/// written by a background thread. write() formats the line and enqueues it; it never waits
/// for I/O: when the queue (8192 lines) is full the oldest line is overwritten. Each line is
/// flushed by the background thread; destruction writes what is still queued.
class AccessLog {
 public:
  /// Opens (appends to) `path`. kInvalidArgument when it cannot be opened.
  static Result<std::unique_ptr<AccessLog>> open(const std::string& path, LogFormat format);

  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  /// Thread-safe.
  void write(const AccessRecord& record);

 private:
  AccessLog(std::shared_ptr<spdlog::details::thread_pool> pool,
            std::shared_ptr<spdlog::logger> logger, LogFormat format);

  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<spdlog::logger> logger_;
  LogFormat format_;
};

/// The access log as a decision observer: one record per decision (time the store decided
/// at, or decide()'s start when it does not say; the request; binding rule, decision word or
/// "error", degraded, latency from decide() to the answer, rules hash). `log` and `clock`
/// must outlive it.
std::unique_ptr<DecisionObserver> makeAccessLogObserver(AccessLog& log, const Clock& clock);

}  // namespace sluice::app
