#include "app/counter_snapshots.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace sluice::app {

Result<std::unique_ptr<CounterSnapshots>> CounterSnapshots::start(
    const MemorySnapshotOptions& options, Store& memory, std::function<RuleSetPtr()> rules,
    const Clock& clock, Metrics& metrics) {
  MemoryCounters* counters = memoryCountersOf(memory);
  if (counters == nullptr) {
    return makeError(ErrorKind::kInvalidArgument, "--memory-snapshot: not a memory store");
  }
  auto restored = restoreMemorySnapshot(*counters, options, rules(), clock.nowMicros(), metrics);
  if (!restored) {
    return makeError(ErrorKind::kInvalidArgument, "--memory-snapshot: " + restored.error().message);
  }
  std::unique_ptr<CounterSnapshots> snapshots(new CounterSnapshots());
  snapshots->snapshotter_ = makeMemorySnapshotter(*counters, options, std::move(rules), clock,
                                                  snapshots->thread_.executor(), metrics);
  snapshots->snapshotter_->start();
  snapshots->thread_.start();
  spdlog::info("memory snapshots to {} every {} ms", options.path, options.interval.count());
  return snapshots;
}

CounterSnapshots::~CounterSnapshots() {
  // The periodic timer belongs to the thread: it goes after the thread stopped.
  thread_.stop();
  snapshotter_.reset();
}

void CounterSnapshots::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  snapshotter_->stop();
  thread_.stop();  // a periodic snapshot in progress completes first
  if (Status written = snapshotter_->writeNow(); written) {
    spdlog::info("memory snapshot written at shutdown");
  } else {
    spdlog::error("memory snapshot at shutdown failed: {}", written.error().message);
  }
}

}  // namespace sluice::app
