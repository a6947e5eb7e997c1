#include "app/access_log.hpp"

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "sluice/simulate/access_record.hpp"

namespace sluice::app {
namespace {

constexpr std::size_t kQueueLines = 8192;
constexpr std::string_view kPlainPattern = "%Y-%m-%dT%H:%M:%S.%e%z access %v";
// The JSON line is whole in the message: its time is the decision's, not the logger's.
constexpr std::string_view kJsonPattern = "%v";

void appendString(std::string& out, std::string_view name, std::string_view value, bool json) {
  if (json) {
    out += '"';
    out += name;
    out += "\":\"";
  } else {
    out += name;
    out += "=\"";
  }
  appendJsonEscaped(out, value);
  out += '"';
}

}  // namespace

std::string formatAccessRecord(const AccessRecord& record, LogFormat format) {
  const bool json = format == LogFormat::kJson;
  if (json) {
    std::string out;
    DecisionRequest fallback;
    const DecisionRequest* request = record.request;
    if (request == nullptr) {
      fallback.domain = std::string(record.domain);
      fallback.client_id = std::string(record.client);
      request = &fallback;
    }
    out.reserve(256);
    simulate::appendAccessJson(out, record.time_us, *request, record.rule, record.decision,
                               record.degraded, record.latency_us, record.rules_hash);
    return out;
  }
  const char* sep = json ? "," : " ";
  std::string out;
  out.reserve(128 + record.domain.size() + record.client.size() + record.rule.size());
  appendString(out, "domain", record.domain, json);
  out += sep;
  appendString(out, "client", record.client, json);
  out += sep;
  appendString(out, "rule", record.rule, json);
  out += sep;
  if (json) {
    appendString(out, "decision", record.decision, json);
    out += ",\"degraded\":";
  } else {
    // The decision words are fixed identifiers: no quoting needed.
    out += "decision=";
    out += record.decision;
    out += " degraded=";
  }
  out += record.degraded ? "true" : "false";
  out += json ? ",\"latency_us\":" : " latency_us=";
  out += std::to_string(record.latency_us);
  return out;
}

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path, LogFormat format) {
  spdlog::sink_ptr sink;
  try {
    if (path == "-") {
      sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    }
  } catch (const spdlog::spdlog_ex& e) {
    return makeError(ErrorKind::kInvalidArgument,
                     "--access-log " + path + ": cannot open: " + e.what());
  }
  // Its own pool and thread: the access log never competes with (or reconfigures) the
  // default logger.
  auto pool = std::make_shared<spdlog::details::thread_pool>(kQueueLines, 1);
  auto logger = std::make_shared<spdlog::async_logger>(
      "access", std::move(sink), pool, spdlog::async_overflow_policy::overrun_oldest);
  logger->set_pattern(std::string(format == LogFormat::kJson ? kJsonPattern : kPlainPattern));
  logger->set_level(spdlog::level::info);
  // Flushing happens on the pool's thread, so a line reaches the file promptly without
  // costing the I/O threads anything.
  logger->flush_on(spdlog::level::info);
  return std::unique_ptr<AccessLog>(new AccessLog(std::move(pool), std::move(logger), format));
}

AccessLog::AccessLog(std::shared_ptr<spdlog::details::thread_pool> pool,
                     std::shared_ptr<spdlog::logger> logger, LogFormat format)
    : pool_(std::move(pool)), logger_(std::move(logger)), format_(format) {}

AccessLog::~AccessLog() {
  // The pool's destructor writes what is queued and joins its thread (the logger only holds
  // it weakly); after the join the logger and its sink are this thread's alone.
  pool_.reset();
  logger_.reset();
}

void AccessLog::write(const AccessRecord& record) {
  logger_->info(formatAccessRecord(record, format_));
}

namespace {

class AccessLogObserver final : public DecisionObserver {
 public:
  AccessLogObserver(AccessLog& log, const Clock& clock) : log_(log), clock_(clock) {}

  void observe(const DecisionRequest& request, const Result<Decision>& decision,
               Micros started_us) override {
    if (request.reservation.op != HoldOp::kNone) {
      // A reservation step is no decision a replay could repeat (docs/reservations.md):
      // `sluice simulate` would charge its amount as hits.
      return;
    }
    AccessRecord record;
    record.request = &request;
    record.domain = request.domain;
    record.client = request.client_id;
    record.time_us = started_us;
    if (decision) {
      if (decision->decided_at_us != 0) {
        record.time_us = decision->decided_at_us;
      }
      if (decision->rules) {
        record.rules_hash = decision->rules->hash;
      }
      const LimitStatus* binding = bindingLimit(*decision);
      record.rule = binding != nullptr ? std::string_view(binding->name) : std::string_view();
      record.decision = decisionWord(*decision);
      record.degraded = decision->degraded;
    } else {
      record.decision = "error";
    }
    record.latency_us = clock_.nowMicros() - started_us;
    log_.write(record);
  }

 private:
  AccessLog& log_;
  const Clock& clock_;
};

}  // namespace

std::unique_ptr<DecisionObserver> makeAccessLogObserver(AccessLog& log, const Clock& clock) {
  return std::make_unique<AccessLogObserver>(log, clock);
}

}  // namespace sluice::app
