#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice::app {

/// Holds the active rules and reloads them when the files change (docs/architecture.md,
/// "Conventions"): every change is loaded and validated as a whole; only a valid set is swapped in,
/// otherwise the old set keeps serving, each error is logged (one line, file:line:column) and
/// `rules_reloads_total{result="failure"}` is bumped.
///
/// Typical wiring:
///   auto watcher = RulesWatcher::create(control_executor, {options.rules}, metrics);
///   if (auto first = watcher->reloadNow(); first.status == RulesWatcher::Status::kRejected) {
///     return 1;  // errors already logged; first.errors has them too
///   }
///   watcher->onReload([](const RuleSetPtr& rules) { ... });
///   watcher->start();                        // poll for changes
///   on SIGHUP: watcher->requestReload();      // or reloadNow() off the I/O threads
///   per request: RuleSetPtr rules = watcher->current();   // one snapshot per request
///   at shutdown: watcher->stop();
///
/// Change detection: every `poll_interval` the watcher compares a fingerprint of the path
/// (for a directory, the rules files' names, inode, size, mtime, ctime and, up to 1 MiB, a
/// content digest; hidden files and editor temporaries ignored, as the loader does). A change is
/// reloaded once the fingerprint has stayed the same for `debounce`, so an editor's
/// truncate-then-write is read once it is complete. A change is noticed within poll_interval +
/// debounce (0.7 s by default). A set whose content hash equals the active one is not swapped
/// (Status::kUnchanged).
///
/// Metrics: `rules_reloads_total{result="success|failure"}` per validated / refused load
/// (the first load included; unchanged content counts nothing), gauge `rules_active` = the
/// number of limits in the active set.
///
/// Thread safety: current() may be called from any thread (each keeps a copy, see current());
/// reloadNow(), requestReload(), onReload(), start() and stop() may be called from any thread.
/// Loads are serialized. The polling and requestReload() loads run on `executor`, in a strand, so
/// it may be run by several threads (file reads and YAML parsing: give it a control executor rather
/// than an I/O thread's).
class RulesWatcher : public std::enable_shared_from_this<RulesWatcher> {
 public:
  struct Options {
    std::string path;                              ///< rules file or directory
    std::chrono::milliseconds poll_interval{500};  ///< how often the fingerprint is checked
    std::chrono::milliseconds debounce{200};       ///< how long a change must be stable
    LoadOptions load;                              ///< e.g. merge_domain_config
  };

  enum class Status {
    kSwapped,    ///< a new, valid set is active
    kUnchanged,  ///< valid, with the same content hash as the active set: not swapped
    kRejected,   ///< invalid: the previous set (if any) stays active
  };

  struct Outcome {
    Status status = Status::kRejected;
    std::vector<RuleError> errors;  ///< every error when kRejected
    RuleSetPtr active;              ///< the active set afterwards (null if none ever loaded)
  };

  using ReloadCallback = std::function<void(RuleSetPtr)>;

  /// `clock` stamps RuleSet::loaded_at_ms (wall clock, ms); it must outlive the watcher.
  /// Registers its metric families in `metrics`, which must outlive the watcher too.
  static std::shared_ptr<RulesWatcher> create(boost::asio::any_io_executor executor,
                                              Options options, Metrics& metrics,
                                              const Clock& clock = defaultClock());

  ~RulesWatcher();
  RulesWatcher(const RulesWatcher&) = delete;
  RulesWatcher& operator=(const RulesWatcher&) = delete;

  /// The active rules; null until a first valid load. Every decision asks, on every I/O
  /// thread: each thread keeps its own copy and takes current_mutex_ only when a swap has
  /// changed generation_ since (an acquire load otherwise, no lock shared between threads).
  /// A thread's copy keeps the set it last saw alive until its next call.
  RuleSetPtr current() const {
    struct Copy {
      std::uint64_t generation = 0;  // 0: no set loaded, whichever watcher
      RuleSetPtr rules;
    };
    thread_local Copy copy;
    if (copy.generation != generation_.load(std::memory_order_acquire)) {
      std::lock_guard lock(current_mutex_);
      copy = {generation_.load(std::memory_order_relaxed), current_};
    }
    return copy.rules;
  }

  /// Loads and validates now, on the calling thread; swaps when valid and changed; logs and
  /// counts the result. Callbacks registered with onReload() run (on this thread) after a swap.
  Outcome reloadNow();

  /// Installs a set loaded and validated elsewhere (from an xDS management server) with the
  /// same bookkeeping as reloadNow(): refused when it has errors (each logged), swapped when
  /// its hash or version differs from the active set's, counted, callbacks run. `source`
  /// names it in the log lines. A watcher fed this way is not start()ed (no path to poll).
  Outcome install(LoadResult loaded, const std::string& source);

  /// Posts reloadNow() to the executor and returns at once (for signal handlers).
  void requestReload();

  /// Adds a callback run after every swap with the new set. Callbacks must not throw.
  void onReload(ReloadCallback callback);

  /// Starts polling the path on the executor. Idempotent.
  void start();
  /// Stops polling; pending timer waits end. Idempotent; current() stays valid.
  void stop();

  const std::string& path() const { return options_.path; }

 private:
  RulesWatcher(boost::asio::any_io_executor executor, Options options, Metrics& metrics,
               const Clock& clock);
  static const Clock& defaultClock();
  Outcome installLocked(LoadResult loaded, const std::string& source,
                        std::unique_lock<std::mutex>& lock);
  void schedulePoll(std::chrono::milliseconds delay);
  void poll();

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  Options options_;
  const Clock& clock_;
  Counter& success_;
  Counter& failure_;
  Gauge& active_;
  /// Not std::atomic<RuleSetPtr>: GCC 12's libstdc++ implements it with a lock bit that
  /// load() releases with a relaxed store, so nothing orders a reader's read of the pointer
  /// before the next store()'s write to it (ThreadSanitizer reported exactly that pair, a
  /// decision on an I/O thread against a reload: docs/quality.md). The pointer is copied
  /// under a mutex, which orders both sides; current() does so once per swap and thread.
  mutable std::mutex current_mutex_;
  RuleSetPtr current_;
  /// current_'s generation, written under current_mutex_ with each swap: unique in the process
  /// (a process-wide counter), so a thread's copy can never be taken for another watcher's set.
  std::atomic<std::uint64_t> generation_{0};

  std::mutex reload_mutex_;         // serializes loads; guards loaded_fingerprint_
  std::string loaded_fingerprint_;  // fingerprint taken just before the last load

  std::mutex callbacks_mutex_;
  std::vector<ReloadCallback> callbacks_;

  // Touched only in strand_: by start()/stop() (posted) and the poll chain.
  boost::asio::steady_timer timer_;
  bool polling_ = false;
  std::string candidate_fingerprint_;  // a change seen, waiting to be stable for `debounce`
  std::atomic<bool> stopped_{false};
};

/// A cheap fingerprint of a rules path (file or directory): changes when a rules file is
/// added, removed, renamed, replaced or written. Exposed for tests.
std::string rulesFingerprint(const std::string& path);

}  // namespace sluice::app
