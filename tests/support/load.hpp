#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {

/// Closed-loop HTTP load on POST /shouldAllowRequest from threads of their own, counting the
/// answers: 200 allowed, 429 denied, anything else other.
struct Load {
  std::atomic<std::int64_t> allowed{0};
  std::atomic<std::int64_t> denied{0};
  std::atomic<std::int64_t> other{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;

  /// `per_thread_rate` > 0: each thread sends at most that many requests per second (a
  /// fixed offered load, whatever the machine's speed).
  void start(SluiceProcess& sluice, int threads_count, const std::string& body,
             std::int64_t max_requests = -1, int per_thread_rate = 0) {
    for (int t = 0; t < threads_count; ++t) {
      threads.emplace_back([this, &sluice, body, max_requests, per_thread_rate] {
        HttpClient client = sluice.client(std::chrono::milliseconds(10'000));
        std::int64_t sent = 0;
        const auto begin = std::chrono::steady_clock::now();
        while (!stop.load() && (max_requests < 0 || sent < max_requests)) {
          if (per_thread_rate > 0) {
            std::this_thread::sleep_until(
                begin + std::chrono::microseconds(sent * 1'000'000 / per_thread_rate));
          }
          ++sent;
          HttpResponse r = client.post("/shouldAllowRequest", body);
          if (r.status == 200) {
            ++allowed;
          } else if (r.status == 429) {
            ++denied;
          } else {
            ++other;
          }
        }
      });
    }
  }
  void join() {
    for (auto& t : threads) {
      t.join();
    }
    threads.clear();
  }
  ~Load() {
    stop = true;
    join();
  }
};

}  // namespace sluice::test
