#include "sluice/xds/rules_client.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "xds/sotw_subscription.hpp"

namespace sluice::xds {
namespace {

namespace discovery = ::envoy::service::discovery::v3;

constexpr std::string_view kConnected = "rules_xds_connected";
constexpr std::string_view kUpdates = "rules_xds_updates_total";
constexpr std::string_view kLastUpdate = "rules_xds_last_update_timestamp_seconds";
constexpr std::string_view kFailures = "rules_xds_stream_failures_total";

Metrics& describe(Metrics& metrics) {
  metrics.describe(kConnected, Metrics::Type::kGauge,
                   "1 while the stream to the xDS management server is open");
  metrics.describe(kUpdates, Metrics::Type::kCounter,
                   "Rule sets received over xDS by result: accepted (ACKed, in force) or "
                   "rejected (NACKed, the previous set kept)");
  metrics.describe(kLastUpdate, Metrics::Type::kGauge,
                   "Unix time of the last rule set accepted over xDS (0: none yet)");
  metrics.describe(kFailures, Metrics::Type::kCounter,
                   "xDS streams that failed or could not be opened (each retried with backoff)");
  return metrics;
}

class RealSleeper final : public Sleeper {
 public:
  bool sleepFor(std::chrono::milliseconds delay) override {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, delay, [this] { return woken_; });
    return !woken_;
  }
  void wake() override {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
};

Result<std::string> readFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(ErrorKind::kInvalidArgument,
                     std::string(what) + " " + path + ": cannot be read");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return makeError(ErrorKind::kInvalidArgument,
                     std::string(what) + " " + path + ": not a PEM file");
  }
  return text.str();
}

class RulesClientImpl final : public RulesClient {
 public:
  RulesClientImpl(ClientOptions options, ApplyConfigs apply, Metrics& metrics, const Clock& clock,
                  std::unique_ptr<Sleeper> sleeper, std::function<double()> random01)
      : options_(std::move(options)),
        clock_(clock),
        connected_(describe(metrics).gauge(kConnected)),
        accepted_(metrics.counter(kUpdates, {{"result", "accepted"}})),
        rejected_(metrics.counter(kUpdates, {{"result", "rejected"}})),
        last_update_(metrics.gauge(kLastUpdate)),
        failures_(metrics.counter(kFailures)),
        sleeper_(sleeper ? std::move(sleeper) : makeRealSleeper()),
        backoff_(options_.backoff, random01 ? std::move(random01) : defaultRandom()),
        subscription_(options_, [this, apply = std::move(apply)](
                                    const std::string& version,
                                    std::vector<RateLimitConfigResource> resources) {
          return apply(version, std::move(resources));
        }) {}

  ~RulesClientImpl() override { stop(); }

  Status start() override {
    auto credentials = makeCredentials();
    if (!credentials) {
      return credentials.error();
    }
    ::grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(std::min<std::int64_t>(options_.backoff.initial.count(), 1'000)));
    // A server that vanishes without closing the connection is noticed by keepalive pings.
    // Five minutes: grpc servers (C core and Go alike) refuse pings on a quiet stream that
    // come more often, with GOAWAY "too_many_pings".
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 300'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
    if (!options_.tls.server_name.empty()) {
      args.SetSslTargetNameOverride(options_.tls.server_name);
    }
    channel_ = ::grpc::CreateCustomChannel(options_.server, *credentials, args);
    stub_ = discovery::AggregatedDiscoveryService::NewStub(channel_);
    thread_ = std::thread([this] { loop(); });
    return {};
  }

  void stop() override {
    if (stopping_.exchange(true)) {
      return;
    }
    sleeper_->wake();
    {
      std::lock_guard lock(context_mutex_);
      if (context_) {
        context_->TryCancel();
      }
    }
    if (thread_.joinable()) {
      thread_.join();
    }
    connected_.set(0);
  }

 private:
  static std::function<double()> defaultRandom() {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    return [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }

  Result<std::shared_ptr<::grpc::ChannelCredentials>> makeCredentials() const {
    if (!options_.tls.enabled) {
      return ::grpc::InsecureChannelCredentials();
    }
    ::grpc::SslCredentialsOptions ssl;
    if (!options_.tls.ca_file.empty()) {
      auto ca = readFile(options_.tls.ca_file, "--xds-tls-ca");
      if (!ca) {
        return ca.error();
      }
      ssl.pem_root_certs = std::move(*ca);
    }
    if (options_.tls.cert_file.empty() != options_.tls.key_file.empty()) {
      return makeError(ErrorKind::kInvalidArgument,
                       "--xds-tls-cert and --xds-tls-key go together (mutual TLS)");
    }
    if (!options_.tls.cert_file.empty()) {
      auto cert = readFile(options_.tls.cert_file, "--xds-tls-cert");
      if (!cert) {
        return cert.error();
      }
      auto key = readFile(options_.tls.key_file, "--xds-tls-key");
      if (!key) {
        return key.error();
      }
      ssl.pem_cert_chain = std::move(*cert);
      ssl.pem_private_key = std::move(*key);
    }
    return ::grpc::SslCredentials(ssl);
  }

  void loop() {
    spdlog::info("rules: xDS client for {} (node {}), subscribing to {}", options_.server,
                 options_.node_id, kRateLimitConfigType);
    while (!stopping_.load()) {
      const bool received = runStream();
      if (stopping_.load()) {
        break;
      }
      failures_.inc();
      if (received) {
        backoff_.reset();
      }
      const auto delay = backoff_.next();
      spdlog::info("rules: reconnecting to the xDS server {} in {} ms", options_.server,
                   delay.count());
      if (!sleeper_->sleepFor(delay)) {
        break;
      }
    }
  }

  /// One stream, until it ends; true when at least one response arrived on it.
  bool runStream() {
    auto context = std::make_shared<::grpc::ClientContext>();
    {
      std::lock_guard lock(context_mutex_);
      if (stopping_.load()) {
        return false;
      }
      context_ = context;
    }
    auto stream = stub_->StreamAggregatedResources(context.get());
    bool received = false;
    if (stream->Write(subscription_.firstRequest())) {
      connected_.set(1);
      if (!was_connected_) {
        spdlog::info("rules: connected to the xDS server {}{}", options_.server,
                     subscription_.acceptedVersion().empty()
                         ? std::string()
                         : ", holding version " + subscription_.acceptedVersion());
      }
      was_connected_ = true;
      discovery::DiscoveryResponse response;
      while (stream->Read(&response)) {
        received = true;
        backoff_.reset();
        const discovery::DiscoveryRequest answer = subscription_.onResponse(response);
        if (subscription_.lastRejected()) {
          rejected_.inc();
          // One line per rejected version; the validator's messages are each logged by the
          // rules watcher, a response that could not be read at all is told here.
          const std::string& reason = subscription_.lastError();
          const std::size_t lines =
              1 + static_cast<std::size_t>(std::count(reason.begin(), reason.end(), '\n'));
          spdlog::error("rules: xDS version '{}' (nonce {}, {} resource(s)) NACKed, {}: {}{}",
                        response.version_info(), response.nonce(), response.resources_size(),
                        subscription_.acceptedVersion().empty()
                            ? std::string("no xDS rules in force yet")
                            : "version '" + subscription_.acceptedVersion() + "' stays in force",
                        reason.substr(0, reason.find('\n')),
                        lines > 1 ? " (+" + std::to_string(lines - 1) + " more)" : std::string());
        } else {
          accepted_.inc();
          last_update_.set(static_cast<double>(clock_.nowMicros()) / kMicrosPerSecond);
        }
        if (!stream->Write(answer)) {
          break;
        }
      }
    }
    stream->WritesDone();
    const ::grpc::Status status = stream->Finish();
    connected_.set(0);
    {
      std::lock_guard lock(context_mutex_);
      context_.reset();
    }
    if (!stopping_.load()) {
      // One line per broken stream; the first failure after a good stream at warn, the
      // repeats while the server stays unreachable at debug.
      const auto level = was_connected_ || received ? spdlog::level::warn : spdlog::level::debug;
      spdlog::log(level, "rules: xDS stream to {} ended: {} ({}); {}", options_.server,
                  status.error_message().empty() ? "closed" : status.error_message(),
                  static_cast<int>(status.error_code()),
                  subscription_.acceptedVersion().empty()
                      ? std::string("no rules from xDS yet")
                      : "deciding with version '" + subscription_.acceptedVersion() + "'");
      was_connected_ = false;
    }
    return received;
  }

  ClientOptions options_;
  const Clock& clock_;
  Gauge& connected_;
  Counter& accepted_;
  Counter& rejected_;
  Gauge& last_update_;
  Counter& failures_;
  std::unique_ptr<Sleeper> sleeper_;
  Backoff backoff_;
  SotwSubscription subscription_;  // touched only by the client's thread
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<discovery::AggregatedDiscoveryService::Stub> stub_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool was_connected_ = false;
  std::mutex context_mutex_;
  std::shared_ptr<::grpc::ClientContext> context_;
};

}  // namespace

Backoff::Backoff(BackoffOptions options, std::function<double()> random01)
    : options_(options), random01_(std::move(random01)) {}

std::chrono::milliseconds Backoff::next() {
  const double max = static_cast<double>(options_.max.count());
  double delay = static_cast<double>(options_.initial.count());
  for (int i = 0; i < attempt_ && delay < max; ++i) {
    delay *= 2;
  }
  delay = std::min(delay, max);
  if (options_.jitter && options_.random_factor > 0) {
    const double spread = delay * options_.random_factor;
    delay = delay - spread + random01_() * 2 * spread;
    delay = std::clamp(delay, 0.0, max);
  }
  ++attempt_;
  return std::chrono::milliseconds(static_cast<std::int64_t>(delay));
}

std::unique_ptr<Sleeper> makeRealSleeper() { return std::make_unique<RealSleeper>(); }

std::unique_ptr<RulesClient> makeRulesClient(ClientOptions options, ApplyConfigs apply,
                                             Metrics& metrics, const Clock& clock,
                                             std::unique_ptr<Sleeper> sleeper,
                                             std::function<double()> random01) {
  return std::make_unique<RulesClientImpl>(std::move(options), std::move(apply), metrics, clock,
                                           std::move(sleeper), std::move(random01));
}

std::vector<std::pair<std::string, std::string>> parseNodeMetadata(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    if (const auto eq = entry.find('='); eq != std::string_view::npos) {
      out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace sluice::xds
