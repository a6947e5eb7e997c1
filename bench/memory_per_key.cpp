// Bytes per key of the memory store: RSS growth while N distinct keys are charged once each,
// divided by N. Keys look like the server's (escaped client "|" bucket key) and are padded
// to a fixed length so results are comparable. Also prints single-thread request rates (new
// keys, then existing ones); timings on a shared machine are indicative only.
//
//   ./build/bench/bench_memory_per_key [keys=1000000] [algorithm=fixed_window] [key_length=40]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/store/memory_store.hpp"

namespace {

long residentBytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0;
  long resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

std::string makeKey(long i, std::size_t length) {
  char head[32];
  std::snprintf(head, sizeof head, "user-%09ld|", i);
  std::string key = head;
  key += "auth:auth_type=login;0;fw";
  key.resize(length, 'x');
  return key;
}

}  // namespace

int main(int argc, char** argv) {
  const long keys = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const auto algorithm = sluice::parseAlgorithm(argc > 2 ? argv[2] : "fixed_window");
  const std::size_t key_length = argc > 3 ? static_cast<std::size_t>(std::atol(argv[3])) : 40;
  if (keys <= 0 || !algorithm || key_length < 15) {
    std::fprintf(stderr, "usage: %s [keys] [algorithm] [key_length >= 15]\n", argv[0]);
    return 2;
  }

  sluice::ManualClock clock;
  sluice::Metrics metrics;
  sluice::MemoryStoreOptions options;
  options.max_keys = static_cast<std::size_t>(keys);
  sluice::StorePtr store = sluice::makeMemoryStore(options, clock, metrics);

  sluice::StoreRequest request;
  request.limits.resize(1);
  request.limits[0].params.algorithm = *algorithm;
  request.limits[0].params.limit = 100;
  request.limits[0].params.window_us = 3600 * sluice::kMicrosPerSecond;
  request.limits[0].key.reserve(key_length);

  long allowed = 0;
  const long before = residentBytes();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < keys; ++i) {
    request.limits[0].key = makeKey(i, key_length);
    store->evaluate(request, [&](sluice::Result<sluice::StoreResponse> r) {
      allowed += (r.ok() && r->allowed) ? 1 : 0;
    });
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const long after = residentBytes();

  // Then requests on the existing keys, in a scattered order (cache misses as in production).
  const auto again = std::chrono::steady_clock::now();
  for (long i = 0; i < keys; ++i) {
    request.limits[0].key = makeKey((i * 7919) % keys, key_length);
    store->evaluate(request, [&](sluice::Result<sluice::StoreResponse> r) {
      allowed += (r.ok() && r->allowed) ? 1 : 0;
    });
  }
  const double hit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();

  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::printf("algorithm=%s keys=%ld key_length=%zu allowed=%ld of %ld\n",
              std::string(sluice::algorithmName(*algorithm)).c_str(), keys, key_length, allowed,
              2 * keys);
  std::printf("rss_growth_bytes=%ld bytes_per_key=%.1f\n", after - before,
              static_cast<double>(after - before) / static_cast<double>(keys));
  std::printf("inserts_per_second=%.0f (one thread, new key each)\n",
              static_cast<double>(keys) / seconds);
  std::printf("requests_per_second=%.0f (one thread, existing keys)\n",
              static_cast<double>(keys) / hit_seconds);
  std::printf("memory_store_keys=%.0f\n", metrics.gauge("memory_store_keys").value());
  return allowed == 2 * keys ? 0 : 1;
}
