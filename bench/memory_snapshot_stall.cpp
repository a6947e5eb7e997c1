// How long a decision on the memory store waits while a snapshot runs (docs/benchmarks.md,
// "Memory snapshots"). Fills a memory store with N fixed-window buckets, then D threads
// decide on random keys as fast as they can, each decision timed, while the main thread
// writes snapshots back to back (--memory-snapshot's writer) for a few seconds; then the
// same load without snapshots. Prints p50/p99/p99.9/max of the decision latency in both
// phases and the snapshots' durations.
//
//   cmake --build build --target bench_memory_snapshot_stall
//   ./build/bench/bench_memory_snapshot_stall [keys=1000000] [threads=2] [seconds=5] [path]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/manual_executor.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/memory_snapshot.hpp"
#include "sluice/store/memory_store.hpp"

namespace {

using namespace sluice;
using Steady = std::chrono::steady_clock;

std::string keyOf(std::size_t i) {
  return BucketKey::storeKey("client-" + std::to_string(i), "bench:user=u;i0;fw");
}

StoreRequest requestFor(std::size_t i) {
  StoreLimit limit;
  limit.key = keyOf(i);
  limit.params.algorithm = Algorithm::kFixedWindow;
  limit.params.limit = 1'000'000'000;
  limit.params.window_us = 3'600 * kMicrosPerSecond;
  StoreRequest request;
  request.limits.push_back(std::move(limit));
  return request;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) {
    return 0;
  }
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

/// Runs the deciding threads until `stop`; returns every decision's latency in µs.
std::vector<double> decide(Store& store, std::size_t keys, unsigned threads,
                           const std::atomic<bool>& stop) {
  std::vector<std::vector<double>> per_thread(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 random(t + 1);
      std::uniform_int_distribution<std::size_t> pick(0, keys - 1);
      std::vector<StoreRequest> requests;
      for (int i = 0; i < 4096; ++i) {
        requests.push_back(requestFor(pick(random)));
      }
      std::size_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const StoreRequest& request = requests[n++ % requests.size()];
        const auto start = Steady::now();
        store.evaluate(request, [](Result<StoreResponse>) {});
        per_thread[t].push_back(
            std::chrono::duration<double, std::micro>(Steady::now() - start).count());
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  std::vector<double> all;
  for (auto& v : per_thread) {
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

void report(const char* phase, std::vector<double> latencies) {
  std::sort(latencies.begin(), latencies.end());
  std::printf("%-18s decisions %9zu  p50 %7.1f us  p99 %7.1f us  p99.9 %8.1f us  max %8.1f us\n",
              phase, latencies.size(), percentile(latencies, 0.50), percentile(latencies, 0.99),
              percentile(latencies, 0.999), latencies.empty() ? 0.0 : latencies.back());
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t keys = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 2;
  const int seconds = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string path = argc > 4 ? argv[4] : "/tmp/sluice-bench-snapshot.snap";

  SystemClock clock;
  Metrics metrics;
  MemoryStoreOptions options;
  options.max_keys = keys + 1000;
  StorePtr store = makeMemoryStore(options, clock, metrics);
  for (std::size_t i = 0; i < keys; ++i) {
    store->evaluate(requestFor(i), [](Result<StoreResponse>) {});
  }
  std::printf("%zu buckets, %u deciding threads, %d s per phase, snapshot to %s\n", keys, threads,
              seconds, path.c_str());

  ManualClock unused;
  ManualExecutor executor(unused);  // writeNow() runs on this thread; nothing is scheduled
  MemorySnapshotOptions snapshot_options;
  snapshot_options.path = path;
  auto snapshotter = makeMemorySnapshotter(
      *memoryCountersOf(*store), snapshot_options, [] { return RuleSetPtr(); }, clock, executor,
      metrics);

  std::atomic<bool> stop{false};
  std::vector<double> during;
  std::thread deciders([&] { during = decide(*store, keys, threads, stop); });
  std::vector<double> snapshot_ms;
  const auto until = Steady::now() + std::chrono::seconds(seconds);
  while (Steady::now() < until) {
    const auto start = Steady::now();
    if (Status written = snapshotter->writeNow(); !written) {
      std::fprintf(stderr, "snapshot failed: %s\n", written.error().message.c_str());
      return 1;
    }
    snapshot_ms.push_back(
        std::chrono::duration<double, std::milli>(Steady::now() - start).count());
  }
  stop = true;
  deciders.join();

  stop = false;
  std::vector<double> quiet;
  std::thread baseline([&] { quiet = decide(*store, keys, threads, stop); });
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  baseline.join();

  report("no snapshot", quiet);
  report("during snapshots", during);
  std::sort(snapshot_ms.begin(), snapshot_ms.end());
  std::printf("snapshots written %zu: median %.0f ms, max %.0f ms each\n", snapshot_ms.size(),
              snapshot_ms[snapshot_ms.size() / 2], snapshot_ms.back());
  std::remove(path.c_str());
  return 0;
}
