// Heap allocations on the request path of the real binary (docs/benchmarks.md): sluice runs
// with tests/tools/alloc_counter.cpp preloaded, which counts the allocations of its I/O
// threads. After a warm-up (the connection's buffers, the bucket, the metric handles, the
// thread's spare request, decision and answer), N decisions on the same connection and key
// make none (rounded per request, see perRequest): neither the HTTP side (header fields,
// body, answer, Respond) nor the decision (docs/benchmarks.md, "Allocations per decision")
// allocates; nor do POST /json and GET /check. A change that adds one fails here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

constexpr const char* kRules = R"(domain: bench
descriptors:
  - key: op
    value: allow
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: op
    value: deny
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: route
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: tier
    rate_limit: {unit: second, requests_per_unit: 1000000000}
)";

constexpr const char* kForwardAuth = R"(forward_auth:
  domain: bench
  client: [{from: header, name: X-User-Id}]
  descriptors: [[{key: op, from: header, name: X-Op}]]
)";

/// What a warm /shouldAllowRequest decision on the memory store allocates: nothing (issue
/// 17 counted 24.5 per request, 9 after the HTTP side stopped allocating). The decision's
/// storage is reused: the service's pending-decision slots (match, store keys, store
/// request, positions), the thread's spare request, decision, answer and StoreResponse,
/// and the callbacks are stored in place (DecisionService::Callback an InplaceFunction,
/// Store::Callback two pointers). docs/benchmarks.md, "Allocations per decision".
constexpr std::uint64_t kOneDescriptorAllocations = 0;
constexpr std::uint64_t kThreeDescriptorsAllocations = 0;

constexpr int kRequests = 1000;

/// Allocations per request, rounded: Asio's handler memory cache can miss once in a while
/// depending on the order in which a write and a read complete (a stray allocation in a
/// few thousand); a change to the request path moves the figure by a whole one.
std::uint64_t perRequest(std::uint64_t total) { return (total + kRequests / 2) / kRequests; }

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class AllocationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the allocation counter replaces malloc: not with a sanitizer runtime";
#endif
    dir_ = makeTempDir("sluice-allocations");
    counter_file_ = dir_ + "/counts";
    std::string config = dir_ + "/server.yaml";
    FILE* f = std::fopen(config.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kForwardAuth, f);
    std::fclose(f);
    SluiceOptions options;
    options.rule_files = {{"bench.yaml", kRules}};
    options.args = {"--threads", "1", "--store", "memory", "--config", config};
    options.env = {{"LD_PRELOAD", SLUICE_ALLOC_COUNTER_LIB},
                   {"SLUICE_ALLOC_COUNTER_FILE", counter_file_}};
    sluice_ = std::make_unique<SluiceProcess>(options);
  }
  void TearDown() override {
    sluice_.reset();
    if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
  }

  std::uint64_t allocations() const {
    std::uint64_t value = 0;
    int fd = ::open(counter_file_.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, &value, sizeof value, 0), static_cast<ssize_t>(sizeof value));
    ::close(fd);
    return value;
  }

  /// Sends `request` `warm_up` times, then `n` times more on the same connection (one at a
  /// time, each answer read before the next request): the allocations of the last n.
  std::uint64_t allocationsOf(const std::string& request, std::string_view expected_status,
                              int warm_up = 200, int n = kRequests) {
    RawConnection connection("127.0.0.1", sluice_->port());
    auto exchange = [&](bool check_status = true) {
      EXPECT_TRUE(connection.send(request));
      std::string answer = connection.readResponse(std::chrono::seconds(10));
      if (check_status) {  // a denial's warm-up starts with the allowed requests
        EXPECT_EQ(answer.substr(9, 3), expected_status) << answer;
      }
      return !answer.empty();
    };
    for (int i = 0; i < warm_up; ++i) {
      if (!exchange(false)) {
        return UINT64_MAX;
      }
    }
    std::uint64_t before = allocations();
    for (int i = 0; i < n; ++i) {
      if (!exchange()) {
        return UINT64_MAX;
      }
    }
    return allocations() - before;
  }

  std::string dir_;
  std::string counter_file_;
  std::unique_ptr<SluiceProcess> sluice_;
};

TEST_F(AllocationsTest, CounterSeesTheIoThread) {
  // A new connection allocates (its session): proves the counter counts the I/O thread.
  std::uint64_t before = allocations();
  RawConnection connection("127.0.0.1", sluice_->port());
  ASSERT_TRUE(connection.send(post("/shouldAllowRequest",
                                   R"({"domain":"bench","clientId":"c","descriptors":)"
                                   R"([{"entries":[{"key":"op","value":"allow"}]}]})")));
  EXPECT_FALSE(connection.readResponse(std::chrono::seconds(10)).empty());
  EXPECT_GT(allocations(), before);
}

TEST_F(AllocationsTest, AWarmAllowedDecisionDoesNotAllocate) {
  std::string request =
      post("/shouldAllowRequest", R"({"domain":"bench","clientId":"client-1","descriptors":)"
                                  R"([{"entries":[{"key":"op","value":"allow"}]}]})");
  EXPECT_EQ(perRequest(allocationsOf(request, "200")), kOneDescriptorAllocations);
}

TEST_F(AllocationsTest, AWarmDeniedDecisionDoesNotAllocate) {
  std::string request =
      post("/shouldAllowRequest", R"({"domain":"bench","clientId":"client-2","descriptors":)"
                                  R"([{"entries":[{"key":"op","value":"deny"}]}]})");
  EXPECT_EQ(perRequest(allocationsOf(request, "429")), kOneDescriptorAllocations);
}

TEST_F(AllocationsTest, AWarmThreeDescriptorDecisionDoesNotAllocate) {
  std::string request = post(
      "/shouldAllowRequest",
      R"({"domain":"bench","clientId":"client-3","descriptors":[)"
      R"({"entries":[{"key":"op","value":"allow"}]},{"entries":[{"key":"route","value":"/a"}]},)"
      R"({"entries":[{"key":"tier","value":"gold"}]}]})");
  EXPECT_EQ(perRequest(allocationsOf(request, "200")), kThreeDescriptorsAllocations);
}

TEST_F(AllocationsTest, AWarmEnvoyDecisionDoesNotAllocate) {
  // POST /json (envoyproxy/ratelimit's endpoint) in the shape Envoy sends: its fast parser
  // refills the thread's spare request, as /shouldAllowRequest's does.
  std::string request = post("/json", R"({"domain":"bench","descriptors":)"
                                      R"([{"entries":[{"key":"op","value":"allow"}]}]})");
  EXPECT_EQ(perRequest(allocationsOf(request, "200")), kOneDescriptorAllocations);
}

TEST_F(AllocationsTest, AWarmForwardAuthDecisionDoesNotAllocate) {
  // GET /check: the request built from the headers refills the thread's spare request.
  std::string request =
      "GET /check HTTP/1.1\r\nHost: sluice\r\nX-User-Id: u1\r\nX-Op: allow\r\n\r\n";
  EXPECT_EQ(perRequest(allocationsOf(request, "200")), kOneDescriptorAllocations);
}

TEST_F(AllocationsTest, OtherDecisionEndpointsAreCounted) {
  // Not asserted (docs/benchmarks.md says what they allocate): printed for the record.
  std::string json = post("/json", R"({"domain":"bench","descriptors":)"
                                   R"([{"entries":[{"key":"op","value":"allow"}]}]})");
  std::string check = "GET /check HTTP/1.1\r\nHost: sluice\r\nX-User-Id: u1\r\nX-Op: allow\r\n\r\n";
  const int n = kRequests;
  double per_json = static_cast<double>(allocationsOf(json, "200", 200, n)) / n;
  double per_check = static_cast<double>(allocationsOf(check, "200", 200, n)) / n;
  std::printf("allocations per request: /json %.2f, /check %.2f\n", per_json, per_check);
  RecordProperty("json_allocations_per_request", std::to_string(per_json));
  RecordProperty("check_allocations_per_request", std::to_string(per_check));
}

}  // namespace
}  // namespace sluice::test
