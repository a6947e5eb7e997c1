#include "sluice/store/memory_snapshot.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "store/memory/snapshot_format.hpp"
#include "store/memory/snapshot_rules.hpp"

namespace sluice {
namespace {

using memory_detail::SnapshotRules;

/// A block is closed once its payload passes this size (a shard's copy may hold several).
constexpr std::size_t kBlockTargetBytes = 16u << 20;

std::string systemError(const std::string& what, const std::string& path) {
  return path + ": " + what + ": " + std::strerror(errno);
}

/// A file descriptor closed when it goes.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) {
        ::close(fd_);
      }
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Status writeAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return makeError(ErrorKind::kInternal, systemError("write", path));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

/// One snapshot being written: a temporary file beside the snapshot, renamed over it once
/// complete and on disk, then the directory synced so the rename is too.
class SnapshotFile {
 public:
  explicit SnapshotFile(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp") {}
  ~SnapshotFile() {
    if (fd_.get() >= 0) {
      ::unlink(temp_.c_str());
    }
  }

  Status open() {
    fd_ = Fd(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fd_.get() < 0) {
      return makeError(ErrorKind::kInternal, systemError("cannot create", temp_));
    }
    return {};
  }

  Status write(std::string_view bytes) { return writeAll(fd_.get(), bytes, temp_); }

  Status commit() {
    if (::fsync(fd_.get()) != 0) {
      return makeError(ErrorKind::kInternal, systemError("fsync", temp_));
    }
    if (::close(fd_.release()) != 0) {
      ::unlink(temp_.c_str());
      return makeError(ErrorKind::kInternal, systemError("close", temp_));
    }
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
      const Error error = makeError(ErrorKind::kInternal, systemError("rename", temp_));
      ::unlink(temp_.c_str());
      return error;
    }
    std::string dir = std::filesystem::path(path_).parent_path().string();
    if (dir.empty()) {
      dir = ".";
    }
    const Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0) {
      return makeError(ErrorKind::kInternal, systemError("fsync of the directory", dir));
    }
    return {};
  }

 private:
  std::string path_;
  std::string temp_;
  Fd fd_{-1};
};

/// Copies shard `shard` into `payload` (records, their rule left 0) under its lock, noting
/// where each block of at most ~kBlockTargetBytes ends; returns the records copied.
std::size_t copyShard(MemoryCounters& counters, std::size_t shard, Micros now, std::string& payload,
                      std::vector<std::pair<std::size_t, std::uint32_t>>& cuts) {
  std::size_t records = 0;
  std::uint32_t in_block = 0;
  std::size_t block_start = 0;
  counters.visitShard(shard, now, [&](const BucketView& bucket) {
    memory_detail::appendSnapshotRecord(payload, bucket.key, 0, bucket.a, bucket.b, bucket.c,
                                        bucket.expires_at, bucket.log);
    ++records;
    ++in_block;
    if (payload.size() - block_start >= kBlockTargetBytes) {
      cuts.emplace_back(payload.size(), in_block);
      block_start = payload.size();
      in_block = 0;
    }
  });
  if (in_block > 0) {
    cuts.emplace_back(payload.size(), in_block);
  }
  return records;
}

/// Fills each copied record's rule (no lock held) with its limit's identity.
void identify(std::string& payload, SnapshotRules& rules) {
  memory_detail::forEachRecordKey(payload, [&](std::string_view key, std::size_t rule_at) {
    const std::uint64_t rule = rules.ruleOf(key);
    for (int i = 0; i < 8; ++i) {
      payload[rule_at + i] = static_cast<char>((rule >> (8 * i)) & 0xffU);
    }
  });
}

/// Writes one whole snapshot of `counters` at `path`; returns the buckets written.
Result<std::size_t> writeSnapshot(MemoryCounters& counters, const std::string& path,
                                  const RuleSetPtr& rule_set, Micros now) {
  SnapshotFile file(path);
  if (Status opened = file.open(); !opened) {
    return opened.error();
  }
  std::string out;
  memory_detail::appendSnapshotHeader(out, now);
  if (Status written = file.write(out); !written) {
    return written.error();
  }
  SnapshotRules rules(rule_set);
  std::string payload;
  std::vector<std::pair<std::size_t, std::uint32_t>> cuts;
  std::uint64_t total = 0;
  for (std::size_t shard = 0; shard < counters.shardCount(); ++shard) {
    payload.clear();
    cuts.clear();
    total += copyShard(counters, shard, now, payload, cuts);
    identify(payload, rules);
    std::size_t from = 0;
    for (const auto& [end, records] : cuts) {
      const std::string_view block = std::string_view(payload).substr(from, end - from);
      out.clear();
      memory_detail::appendBlockHeader(out, block, records);
      if (Status written = file.write(out); !written) {
        return written.error();
      }
      if (Status written = file.write(block); !written) {
        return written.error();
      }
      from = end;
    }
  }
  out.clear();
  memory_detail::appendSnapshotEnd(out, total);
  if (Status written = file.write(out); !written) {
    return written.error();
  }
  if (Status committed = file.commit(); !committed) {
    return committed.error();
  }
  return static_cast<std::size_t>(total);
}

void describeSnapshotMetrics(Metrics& metrics) {
  metrics.describe("memory_snapshots_total", Metrics::Type::kCounter,
                   "Memory-store snapshots by result (written, failed).");
  metrics.describe("memory_snapshot_duration_seconds", Metrics::Type::kHistogram,
                   "Time to take and write one memory-store snapshot.",
                   {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  metrics.describe("memory_snapshot_buckets", Metrics::Type::kGauge,
                   "Buckets in the last memory-store snapshot written.");
  metrics.describe("memory_snapshot_restored_buckets_total", Metrics::Type::kCounter,
                   "Buckets of the start-up snapshot, by outcome (restored, expired, "
                   "rule_gone, capacity, invalid).");
}

class Snapshotter final : public MemorySnapshotter {
 public:
  Snapshotter(MemoryCounters& counters, MemorySnapshotOptions options,
              std::function<RuleSetPtr()> rules, const Clock& clock, Executor& executor,
              Metrics& metrics)
      : counters_(counters),
        options_(std::move(options)),
        rules_(std::move(rules)),
        clock_(clock),
        executor_(executor),
        written_((describeSnapshotMetrics(metrics),
                  metrics.counter("memory_snapshots_total", {{"result", "written"}}))),
        failed_(metrics.counter("memory_snapshots_total", {{"result", "failed"}})),
        duration_(metrics.histogram("memory_snapshot_duration_seconds")),
        buckets_(metrics.gauge("memory_snapshot_buckets")) {}

  ~Snapshotter() override { stop(); }

  void start() override {
    timer_ = executor_.makeTimer();
    schedule();
  }

  void stop() override { stopped_.store(true, std::memory_order_relaxed); }

  Status writeNow() override { return takeSnapshot(); }

 private:
  void schedule() {
    timer_->schedule(std::chrono::duration_cast<std::chrono::microseconds>(options_.interval),
                     [this] {
                       if (stopped_.load(std::memory_order_relaxed)) {
                         return;
                       }
                       (void)takeSnapshot();
                       schedule();
                     });
  }

  Status takeSnapshot() {
    std::lock_guard lock(mutex_);
    const Micros started = clock_.monotonicMicros();
    const Result<std::size_t> written =
        writeSnapshot(counters_, options_.path, rules_(), clock_.nowMicros());
    const double seconds =
        static_cast<double>(clock_.monotonicMicros() - started) / kMicrosPerSecond;
    if (!written) {
      failed_.inc();
      // Logged on every failure: each one is a snapshot lost (the previous file stays).
      spdlog::warn("memory snapshot: {} (the previous snapshot, if any, is kept)",
                   written.error().message);
      return written.error();
    }
    written_.inc();
    duration_.observe(seconds);
    buckets_.set(static_cast<double>(*written));
    spdlog::debug("memory snapshot: {} buckets to {} in {:.3f}s", *written, options_.path, seconds);
    return {};
  }

  MemoryCounters& counters_;
  const MemorySnapshotOptions options_;
  const std::function<RuleSetPtr()> rules_;
  const Clock& clock_;
  Executor& executor_;
  Counter& written_;
  Counter& failed_;
  Histogram& duration_;
  Gauge& buckets_;
  TimerPtr timer_;
  std::atomic<bool> stopped_{false};
  std::mutex mutex_;  ///< one snapshot at a time (a periodic one and the last one)
};

/// The file's bytes; nullopt when there is no file.
Result<std::optional<std::string>> readWhole(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return std::optional<std::string>();
    }
    return makeError(ErrorKind::kInvalidArgument, systemError("cannot open", path));
  }
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return makeError(ErrorKind::kInvalidArgument, systemError("read", path));
    }
    if (n == 0) {
      break;
    }
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return std::optional<std::string>(std::move(bytes));
}

/// A record whose key names an algorithm (the bucket's last ";" part) and whose state that
/// algorithm could have written. A checksum proves the file is the one written, not that
/// its writer was Sluice: a state outside the algorithm's bounds would answer outside them.
bool plausibleRecord(const memory_detail::SnapshotRecord& record) {
  const std::size_t last = record.key.rfind(';');
  if (last == std::string::npos) {
    return false;
  }
  const std::optional<Algorithm> algorithm =
      algorithmFromCode(std::string_view(record.key).substr(last + 1));
  return algorithm && plausibleState(*algorithm, record.state);
}

}  // namespace

Result<SnapshotRestore> restoreMemorySnapshot(MemoryCounters& counters,
                                              const MemorySnapshotOptions& options,
                                              const RuleSetPtr& rules, Micros now,
                                              Metrics& metrics) {
  describeSnapshotMetrics(metrics);
  SnapshotRestore report;
  const auto refuse = [&](const std::string& message) -> Result<SnapshotRestore> {
    if (options.on_error == SnapshotOnError::kFail) {
      return makeError(ErrorKind::kInvalidArgument,
                       message + " (--memory-snapshot-on-error start-empty starts without it)");
    }
    metrics.counter("memory_snapshots_total", {{"result", "unreadable"}}).inc();
    // Kept for a post-mortem; the next snapshot takes its place.
    const std::string aside = options.path + ".unreadable";
    const bool kept = ::rename(options.path.c_str(), aside.c_str()) == 0;
    spdlog::warn("memory snapshot: {}: starting empty (--memory-snapshot-on-error start-empty){}",
                 message, kept ? "; the file is kept as " + aside : std::string());
    report.started_empty = true;
    return report;
  };
  Result<std::optional<std::string>> bytes = readWhole(options.path);
  if (!bytes) {
    report.found = true;
    return refuse(bytes.error().message);
  }
  if (!*bytes) {
    spdlog::info("memory snapshot: no {} yet: starting empty", options.path);
    return report;
  }
  report.found = true;
  Result<memory_detail::SnapshotContents> contents = memory_detail::parseSnapshot(**bytes);
  bytes->reset();
  if (!contents) {
    return refuse(options.path + ": " + contents.error().message);
  }
  report.written_at = contents->written_at;
  SnapshotRules current(rules);
  for (memory_detail::SnapshotRecord& record : contents->records) {
    if (record.expires_at <= now) {
      ++report.expired;
    } else if (!plausibleRecord(record)) {
      ++report.invalid;
    } else if (rules && record.rule != 0 && current.ruleOf(record.key) != record.rule) {
      ++report.rule_gone;
    } else if (!counters.restoreBucket(record.key, std::move(record.state), record.expires_at)) {
      ++report.capacity;
    } else {
      ++report.restored;
    }
  }
  const auto count = [&](const char* outcome, std::size_t n) {
    metrics.counter("memory_snapshot_restored_buckets_total", {{"outcome", outcome}}).inc(n);
  };
  count("restored", report.restored);
  count("expired", report.expired);
  count("rule_gone", report.rule_gone);
  count("capacity", report.capacity);
  count("invalid", report.invalid);
  spdlog::info(
      "memory snapshot: {} buckets restored from {} (dropped: {} expired, {} whose limit is gone "
      "or changed, {} over --memory-max-keys, {} with a state no algorithm writes)",
      report.restored, options.path, report.expired, report.rule_gone, report.capacity,
      report.invalid);
  if (report.invalid > 0) {
    spdlog::warn(
        "memory snapshot: {}: {} buckets dropped: their state is not one their "
        "algorithm writes (a file changed outside Sluice?)",
        options.path, report.invalid);
  }
  return report;
}

std::unique_ptr<MemorySnapshotter> makeMemorySnapshotter(MemoryCounters& counters,
                                                         MemorySnapshotOptions options,
                                                         std::function<RuleSetPtr()> rules,
                                                         const Clock& clock, Executor& executor,
                                                         Metrics& metrics) {
  return std::make_unique<Snapshotter>(counters, std::move(options), std::move(rules), clock,
                                       executor, metrics);
}

}  // namespace sluice
