// What a memory-store decision costs when its bucket is one of many: the server's
// Store::evaluate() (shard locks and all) on one fixed_window limit of 1,000,000 a second,
// keys chosen at random among N (as bench/wrk/decision.lua chooses clients), the store's
// manual clock advanced by a fixed step a decision (10 us: 100,000 decisions a second, so
// every key starts a new window each second, as under bench/run.sh's load). Between two
// decisions it may write `pollute_kib` KiB of fresh memory, standing in for what the HTTP
// and TCP path of a real request pushes out of the caches.
//
//   cmake --build build --target bench_memory_decision
//   ./build/bench/bench_memory_decision [keys=10000] [decisions=2000000] [pollute_kib=0]
//
// Prints nanoseconds per decision (each evaluate() timed alone: the polluting is left out;
// wall clock, so indicative only on a shared machine). Under
// valgrind's cachegrind (--cache-sim=yes) it gives instructions and simulated cache misses
// per decision that do not depend on the machine's load.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/store/memory_store.hpp"

int main(int argc, char** argv) {
  const long keys = argc > 1 ? std::atol(argv[1]) : 10'000;
  const long decisions = argc > 2 ? std::atol(argv[2]) : 2'000'000;
  const long pollute_kib = argc > 3 ? std::atol(argv[3]) : 0;
  if (keys <= 0 || decisions <= 0 || pollute_kib < 0) {
    std::fprintf(stderr, "usage: %s [keys] [decisions] [pollute_kib]\n", argv[0]);
    return 2;
  }

  sluice::ManualClock clock;
  sluice::Metrics metrics;
  sluice::StorePtr store = sluice::makeMemoryStore(sluice::MemoryStoreOptions{}, clock, metrics);

  // Keys as the server builds them for bench/rules/bench.yaml (client "|" bucket key).
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(keys));
  for (long i = 0; i < keys; ++i) {
    char client[32];
    std::snprintf(client, sizeof client, "c%08ld", i);
    names.push_back(std::string(client) + "|bench:op=fixed_window_allow;i0;0");
  }
  sluice::StoreRequest request;
  request.limits.resize(1);
  request.limits[0].params.algorithm = sluice::Algorithm::kFixedWindow;
  request.limits[0].params.limit = 1'000'000;
  request.limits[0].params.window_us = sluice::kMicrosPerSecond;

  // A ring of fresh memory larger than the last-level cache, written a line at a time.
  constexpr std::size_t kRing = 256UL << 20;
  const std::size_t pollute = static_cast<std::size_t>(pollute_kib) << 10;
  std::unique_ptr<char[]> ring = pollute > 0 ? std::make_unique<char[]>(kRing) : nullptr;
  std::size_t ring_at = 0;

  std::mt19937_64 rng(1);
  std::uniform_int_distribution<long> pick(0, keys - 1);
  long allowed = 0;
  std::chrono::steady_clock::duration spent{};
  for (long i = 0; i < decisions; ++i) {
    request.limits[0].key = names[static_cast<std::size_t>(pick(rng))];
    const auto start = std::chrono::steady_clock::now();
    store->evaluate(request, [&](sluice::Result<sluice::StoreResponse> r) {
      allowed += (r.ok() && r->allowed) ? 1 : 0;
      sluice::recycleStoreResponse(std::move(*r));
    });
    spent += std::chrono::steady_clock::now() - start;
    clock.advance(std::chrono::microseconds(10));
    for (std::size_t b = 0; b < pollute; b += 64) {
      ring[ring_at] = static_cast<char>(i);
      ring_at = ring_at + 64 < kRing ? ring_at + 64 : 0;
    }
  }
  const double seconds = std::chrono::duration<double>(spent).count();
  std::printf("keys=%ld decisions=%ld pollute_kib=%ld allowed=%ld\n", keys, decisions, pollute_kib,
              allowed);
  std::printf("ns_per_decision=%.1f (wall clock in evaluate(), the pollution left out)\n",
              seconds * 1e9 / static_cast<double>(decisions));
  return allowed == decisions ? 0 : 1;
}
