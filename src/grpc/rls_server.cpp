#include "sluice/grpc/rls_server.hpp"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/rls_mapping.hpp"
#include "grpc/unix_socket.hpp"

namespace sluice::grpc {
namespace {

namespace net = boost::asio;

constexpr std::string_view kCallsMetric = "grpc_calls_total";
constexpr std::string_view kInFlightMetric = "grpc_calls_in_flight";
constexpr std::string_view kCancelledMetric = "grpc_calls_cancelled_total";
constexpr std::string_view kUnixPrefix = "unix:";
/// The service name envoyproxy/ratelimit registers with grpc.health.v1.
constexpr const char* kHealthServiceName = "ratelimit";

::grpc::StatusCode statusCodeOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return ::grpc::StatusCode::INVALID_ARGUMENT;
    default:
      // The store failed (timeout, connection, script) with --failure-mode closed, or the
      // server is not ready: UNAVAILABLE, so that Envoy's failure_mode_deny applies.
      return ::grpc::StatusCode::UNAVAILABLE;
  }
}

/// Process-wide settings that grpc++ 1.51 on Debian needs to serve calls at a decent cost
/// (docs/benchmarks.md, "gRPC"); both were measured with bench/grpc.sh and perf.
void tuneForGrpc() {
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's deadlock detection on:
  // every lock grpc core takes updates a global lock graph (GraphCycles in the profile).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every call allocates its arena (a few KiB) on a grpc++ thread and frees it when done;
  // with dozens of calls in flight glibc's default 128 KiB trim threshold hands the freed
  // memory back (madvise) only to fault it in again on the next calls: 10 % of the CPU.
  // 32 MiB of free heap may stay mapped instead.
  ::mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

/// grpc++_reflection registers its plugin with every ServerBuilder as soon as it is linked
/// in (a static initializer): this option takes it out again unless reflection is wanted.
class ReflectionSwitch final : public ::grpc::ServerBuilderOption {
 public:
  explicit ReflectionSwitch(bool on) : on_(on) {}
  void UpdateArguments(::grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<::grpc::ServerBuilderPlugin>>* plugins) override {
    if (!on_) {
      std::erase_if(*plugins,
                    [](const auto& plugin) { return plugin->name() == kReflectionPluginName; });
    }
  }

 private:
  static constexpr const char* kReflectionPluginName = "proto_server_reflection";
  bool on_;
};

int clampMillis(std::chrono::milliseconds duration) {
  return static_cast<int>(std::min<std::int64_t>(duration.count(), INT32_MAX));
}

}  // namespace

struct RlsServer::Impl final : public rls::RateLimitService::CallbackService {
  Impl(RlsServerOptions opts, std::vector<RlsWorker> w, Metrics& m)
      : options(std::move(opts)),
        workers(std::move(w)),
        metrics(m),
        in_flight(metrics.gauge(kInFlightMetric)) {
    describeGrpcMetrics(metrics);
    for (auto code : {::grpc::StatusCode::OK, ::grpc::StatusCode::INVALID_ARGUMENT,
                      ::grpc::StatusCode::UNAVAILABLE, ::grpc::StatusCode::CANCELLED,
                      ::grpc::StatusCode::DEADLINE_EXCEEDED}) {
      counters[code] = &metrics.counter(kCallsMetric, {{"code", codeName(code)}});
    }
    cancelled_queued = &metrics.counter(kCancelledMetric, {{"stage", "queued"}});
    cancelled_deciding = &metrics.counter(kCancelledMetric, {{"stage", "deciding"}});
  }

  /// What the client of a call it has given up on saw: DEADLINE_EXCEEDED once its deadline
  /// passed, CANCELLED otherwise (an explicit cancel, a lost connection).
  static ::grpc::Status clientGone(::grpc::CallbackServerContext* context, const char* when) {
    if (context->deadline() <= std::chrono::system_clock::now()) {
      return {::grpc::StatusCode::DEADLINE_EXCEEDED, std::string("deadline passed ") + when};
    }
    return {::grpc::StatusCode::CANCELLED, std::string("cancelled ") + when};
  }

  static std::string codeName(::grpc::StatusCode code) {
    switch (code) {
      case ::grpc::StatusCode::OK:
        return "OK";
      case ::grpc::StatusCode::INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
      case ::grpc::StatusCode::UNAVAILABLE:
        return "UNAVAILABLE";
      case ::grpc::StatusCode::CANCELLED:
        return "CANCELLED";
      case ::grpc::StatusCode::DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
      default:
        return "OTHER";
    }
  }

  void finish(::grpc::ServerUnaryReactor* reactor, ::grpc::Status status) {
    auto it = counters.find(status.error_code());
    if (it != counters.end()) {
      it->second->inc();
    }
    in_flight.add(-1);
    reactor->Finish(std::move(status));
  }

  ::grpc::ServerUnaryReactor* ShouldRateLimit(::grpc::CallbackServerContext* context,
                                              const rls::RateLimitRequest* request,
                                              rls::RateLimitResponse* response) override {
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    in_flight.add(1);
    auto parsed = toDecisionRequest(*request);
    if (!parsed) {
      finish(reactor, ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT, parsed.error().message));
      return reactor;
    }
    // Round-robin over the I/O threads; the call is decided and finished there.
    std::size_t index = next_worker.fetch_add(1, std::memory_order_relaxed) % workers.size();
    RlsWorker worker = workers[index];
    net::post(*worker.io, [this, worker, context, reactor, response,
                           decision_request = std::move(*parsed)]() mutable {
      // Its turn has come: a call nobody waits for any more is not charged.
      if (context->IsCancelled() || context->deadline() <= std::chrono::system_clock::now()) {
        cancelled_queued->inc();
        finish(reactor, clientGone(context, "before decided"));
        return;
      }
      worker.decisions->decide(std::move(decision_request), [this, context, reactor,
                                                             response](Result<Decision> decision) {
        // The client went away while the store was deciding: the decision stands (the store
        // may have charged it, once), the answer goes nowhere. Counted as what the client saw.
        if (context->IsCancelled()) {
          cancelled_deciding->inc();
          finish(reactor, clientGone(context, "while decided"));
          return;
        }
        if (!decision) {
          finish(reactor, ::grpc::Status(statusCodeOf(decision.error()), decision.error().message));
          return;
        }
        toResponse(*decision, options.response_headers, *response);
        if (decision->degraded) {
          context->AddTrailingMetadata("x-sluice-degraded", "true");
        }
        finish(reactor, ::grpc::Status::OK);
      });
    });
    return reactor;
  }

  RlsServerOptions options;
  std::vector<RlsWorker> workers;
  Metrics& metrics;
  Gauge& in_flight;
  std::map<::grpc::StatusCode, Counter*> counters;
  Counter* cancelled_queued = nullptr;
  Counter* cancelled_deciding = nullptr;
  std::atomic<std::size_t> next_worker{0};
  std::unique_ptr<::grpc::Server> server;
  std::vector<std::string> addresses;
  /// Socket files to remove on shutdown, with their identity: a file someone else put in
  /// their place since then is left alone.
  struct OwnedSocket {
    std::string path;
    dev_t device = 0;
    ino_t inode = 0;
  };
  std::vector<std::string> unix_paths;
  std::vector<OwnedSocket> owned_sockets;
  std::mutex shutdown_mutex;
  bool shut_down = false;
};

RlsServer::RlsServer(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(workers), metrics)) {}

RlsServer::~RlsServer() { shutdown(); }

Status RlsServer::start() {
  Impl& impl = *impl_;
  if (impl.workers.empty()) {
    return makeError(ErrorKind::kInternal, "gRPC: no I/O thread to decide on");
  }
  tuneForGrpc();
  ::grpc::EnableDefaultHealthCheckService(true);
  // Before the builder: it instantiates the registered plugins when constructed.
  ::grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ::grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<ReflectionSwitch>(impl.options.reflection));
  // Without this a second server on the same port starts too, and the kernel splits the
  // calls between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             clampMillis(impl.options.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             clampMillis(impl.options.max_connection_age_grace));
  builder.SetMaxReceiveMessageSize(static_cast<int>(impl.options.max_message_bytes));
  std::vector<std::unique_ptr<int>> ports;
  for (const std::string& address : impl.options.listen) {
    if (address.starts_with(kUnixPrefix)) {
      std::string path = address.substr(kUnixPrefix.size());
      if (auto status = prepareUnixSocketPath(path); !status) {
        return makeError(ErrorKind::kUnavailable, "--grpc-listen: " + status.error().message);
      }
      impl.unix_paths.push_back(path);
    }
    ports.push_back(std::make_unique<int>(0));
    builder.AddListeningPort(address, ::grpc::InsecureServerCredentials(), ports.back().get());
  }
  builder.RegisterService(&impl);
  // The socket files are created by bind(): no wider than the configured mode from the
  // start, then exactly that mode.
  const mode_t old_mask = ::umask(static_cast<mode_t>(~impl.options.unix_mode & 0777));
  impl.server = builder.BuildAndStart();
  ::umask(old_mask);
  if (!impl.server) {
    std::string list;
    for (const auto& address : impl.options.listen) {
      list += (list.empty() ? "" : ", ") + address;
    }
    return makeError(ErrorKind::kUnavailable,
                     "--grpc-listen: cannot listen on " + list +
                         " (address in use, or cannot be bound; see the gRPC log above)");
  }
  for (std::size_t i = 0; i < impl.options.listen.size(); ++i) {
    const std::string& address = impl.options.listen[i];
    if (address.starts_with(kUnixPrefix)) {
      std::string path = address.substr(kUnixPrefix.size());
      if (::chmod(path.c_str(), static_cast<mode_t>(impl.options.unix_mode)) != 0) {
        spdlog::warn("gRPC: cannot chmod {:o} {}", impl.options.unix_mode, path);
      }
      struct stat info {};
      if (::lstat(path.c_str(), &info) == 0) {
        impl.owned_sockets.push_back({path, info.st_dev, info.st_ino});
      }
      impl.addresses.push_back(address);
    } else if (address.ends_with(":0")) {
      impl.addresses.push_back(address.substr(0, address.size() - 1) + std::to_string(*ports[i]));
    } else {
      impl.addresses.push_back(address);
    }
  }
  setServing(true);
  return {};
}

std::vector<std::string> RlsServer::addresses() const { return impl_->addresses; }

void RlsServer::setServing(bool serving) {
  std::lock_guard lock(impl_->shutdown_mutex);
  if (!impl_->server || impl_->shut_down) {
    return;
  }
  if (auto* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus(kHealthServiceName, serving);
    health->SetServingStatus("", serving);
  }
}

void RlsServer::shutdown() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.shutdown_mutex);
    if (impl.shut_down || !impl.server) {
      return;
    }
    impl.shut_down = true;
  }
  // Health turns NOT_SERVING, new calls are refused, running ones may finish until the
  // deadline and are cancelled after it; returns once every call has been finished.
  impl.server->Shutdown(std::chrono::system_clock::now() + impl.options.drain_timeout);
  impl.server->Wait();
  for (const auto& socket : impl.owned_sockets) {
    struct stat info {};
    if (::lstat(socket.path.c_str(), &info) == 0 && info.st_dev == socket.device &&
        info.st_ino == socket.inode) {
      ::unlink(socket.path.c_str());
    }
  }
  impl.owned_sockets.clear();
}

void describeGrpcMetrics(Metrics& metrics) {
  metrics.describe(kCallsMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls by the status code their client saw (OK includes "
                   "OVER_LIMIT answers).");
  metrics.describe(kCancelledMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls the client gave up on (cancel, deadline, lost "
                   "connection) before their answer, by stage: queued (not decided, nothing "
                   "charged) or deciding (the store's decision stands; the answer is dropped).");
  metrics.describe(kInFlightMetric, Metrics::Type::kGauge,
                   "gRPC ShouldRateLimit calls received and not answered yet.");
}

}  // namespace sluice::grpc
