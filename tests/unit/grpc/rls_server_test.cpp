#include "grpc/rls_server.hpp"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace sluice::grpc {
namespace {

using namespace std::chrono_literals;
namespace rls = ::envoy::service::ratelimit::v3;

/// Answers every request allowed with one limit of 10, and counts the calls.
class CountingDecisions final : public DecisionService {
 public:
  void decide(DecisionRequest&& request, Callback done) override {
    ++calls;
    Decision decision;
    LimitStatus status;
    status.name = "ten";
    status.limit = 10;
    status.unit = TimeUnit::kMinute;
    status.window_us = unitMicros(TimeUnit::kMinute);
    status.outcome.remaining = 9;
    for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
      decision.descriptors.emplace_back(true, std::vector<LimitStatus>{status});
    }
    done(std::move(decision));
  }
  std::atomic<int> calls{0};
};

rls::RateLimitRequest oneDescriptor() {
  rls::RateLimitRequest request;
  request.set_domain("d");
  auto* entry = request.add_descriptors()->add_entries();
  entry->set_key("k");
  entry->set_value("v");
  return request;
}

bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

class RlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RlsServerOptions options;
    options.listen = {"127.0.0.1:0"};
    server_ =
        std::make_unique<RlsServer>(options, std::vector<RlsWorker>{{&io_, &decisions_}}, metrics_);
    ASSERT_TRUE(server_->start().ok());
    channel_ =
        ::grpc::CreateChannel(server_->addresses().at(0), ::grpc::InsecureChannelCredentials());
    stub_ = rls::RateLimitService::NewStub(channel_);
  }

  void TearDown() override {
    std::thread runner([this] {
      auto guard = boost::asio::make_work_guard(io_);
      while (!stopped_) {
        io_.run_for(10ms);
      }
    });
    server_->shutdown();
    stopped_ = true;
    runner.join();
  }

  double inFlight() { return metrics_.gauge("grpc_calls_in_flight").value(); }
  std::uint64_t calls(const std::string& code) {
    return metrics_.counter("grpc_calls_total", {{"code", code}}).value();
  }

  boost::asio::io_context io_;
  CountingDecisions decisions_;
  Metrics metrics_;
  std::unique_ptr<RlsServer> server_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
  std::atomic<bool> stopped_{false};
};

TEST_F(RlsServerTest, DecidesOnTheWorkerThread) {
  std::thread runner([this] {
    auto guard = boost::asio::make_work_guard(io_);
    io_.run_for(10s);
  });
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  rls::RateLimitResponse response;
  auto status = stub_->ShouldRateLimit(&context, oneDescriptor(), &response);
  io_.stop();
  runner.join();
  io_.restart();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 9u);
  EXPECT_EQ(decisions_.calls, 1);
  EXPECT_EQ(calls("OK"), 1u);
}

TEST_F(RlsServerTest, ACallPastItsDeadlineWhenItsTurnComesIsNotDecided) {
  // The worker's io_context does not run: the call waits in its queue.
  constexpr auto kTimeout = 200ms;
  auto answered = std::async(std::launch::async, [this, kTimeout] {
    ::grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kTimeout);
    rls::RateLimitResponse response;
    return stub_->ShouldRateLimit(&context, oneDescriptor(), &response).error_code();
  });
  ASSERT_TRUE(waitFor([this] { return inFlight() == 1; }));
  // The server received the call by now, so its deadline is at most kTimeout from here.
  std::this_thread::sleep_until(std::chrono::system_clock::now() + kTimeout + 50ms);
  EXPECT_EQ(answered.get(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
  io_.poll();
  EXPECT_EQ(decisions_.calls, 0);
  EXPECT_EQ(calls("DEADLINE_EXCEEDED") + calls("CANCELLED"), 1u);
  EXPECT_EQ(metrics_.counter("grpc_calls_cancelled_total", {{"stage", "queued"}}).value(), 1u);
  EXPECT_EQ(metrics_.counter("grpc_calls_cancelled_total", {{"stage", "deciding"}}).value(), 0u);
  EXPECT_EQ(inFlight(), 0);
}

TEST_F(RlsServerTest, InvalidRequestsAreAnsweredWithoutAWorker) {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  rls::RateLimitRequest request;
  request.set_domain("d");
  rls::RateLimitResponse response;
  auto status = stub_->ShouldRateLimit(&context, request, &response);
  EXPECT_EQ(status.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "descriptors: must be a non-empty array");
  EXPECT_EQ(decisions_.calls, 0);
}

}  // namespace
}  // namespace sluice::grpc
