#include "app/rules_watcher.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

namespace sluice::app {
namespace {

namespace fs = std::filesystem;
namespace net = boost::asio;

constexpr std::string_view kReloadsMetric = "rules_reloads_total";
constexpr std::string_view kActiveMetric = "rules_active";

Metrics& describeMetrics(Metrics& metrics) {
  metrics.describe(kReloadsMetric, Metrics::Type::kCounter,
                   "Rules loads by result: success (validated) or failure (refused, old rules "
                   "kept)");
  metrics.describe(kActiveMetric, Metrics::Type::kGauge, "Number of limits in the active rules");
  return metrics;
}

/// Files up to this size are also hashed when fingerprinted: file timestamps are only as fine
/// as the kernel's clock tick, so two same-size writes within one tick look alike otherwise.
constexpr off_t kHashedFileBytes = 1 << 20;

std::string contentDigest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  char buffer[8192];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash ^= static_cast<unsigned char>(buffer[i]);
      hash *= 0x100000001b3ULL;
    }
  }
  return std::to_string(hash);
}

std::string statFingerprint(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return "error " + std::to_string(errno);
  }
  std::string out = std::to_string(st.st_ino) + ' ' + std::to_string(st.st_size) + ' ' +
                    std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec) +
                    ' ' + std::to_string(st.st_ctim.tv_sec) + '.' +
                    std::to_string(st.st_ctim.tv_nsec);
  if (S_ISREG(st.st_mode) && st.st_size <= kHashedFileBytes) {
    out += ' ' + contentDigest(path);
  }
  return out;
}

}  // namespace

std::string rulesFingerprint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return "file " + statFingerprint(path);
  }
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (isRulesFileName(name)) {
      names.push_back(std::move(name));
    }
  }
  if (ec) {
    return "dir error " + ec.message();
  }
  std::sort(names.begin(), names.end());
  std::string out = "dir";
  for (const std::string& name : names) {
    out += '\n';
    out += name;
    out += ' ';
    out += statFingerprint((fs::path(path) / name).string());
  }
  return out;
}

const Clock& RulesWatcher::defaultClock() {
  static const SystemClock kClock;
  return kClock;
}

std::shared_ptr<RulesWatcher> RulesWatcher::create(net::any_io_executor executor, Options options,
                                                   Metrics& metrics, const Clock& clock) {
  return std::shared_ptr<RulesWatcher>(
      new RulesWatcher(std::move(executor), std::move(options), metrics, clock));
}

RulesWatcher::RulesWatcher(net::any_io_executor executor, Options options, Metrics& metrics,
                           const Clock& clock)
    : strand_(net::make_strand(std::move(executor))),
      options_(std::move(options)),
      clock_(clock),
      success_(describeMetrics(metrics).counter(kReloadsMetric, {{"result", "success"}})),
      failure_(metrics.counter(kReloadsMetric, {{"result", "failure"}})),
      active_(metrics.gauge(kActiveMetric)),
      timer_(strand_) {}

RulesWatcher::~RulesWatcher() = default;

RulesWatcher::Outcome RulesWatcher::reloadNow() {
  std::unique_lock lock(reload_mutex_);
  // Taken before reading, so an edit racing with this load is seen by the next poll.
  loaded_fingerprint_ = rulesFingerprint(options_.path);
  LoadResult loaded = loadRules(options_.path, clock_.nowMicros() / kMicrosPerMilli, options_.load);
  return installLocked(std::move(loaded), options_.path, lock);
}

RulesWatcher::Outcome RulesWatcher::install(LoadResult loaded, const std::string& source) {
  std::unique_lock lock(reload_mutex_);
  return installLocked(std::move(loaded), source, lock);
}

RulesWatcher::Outcome RulesWatcher::installLocked(LoadResult loaded, const std::string& source,
                                                  std::unique_lock<std::mutex>& lock) {
  Outcome outcome;
  const RuleSetPtr previous = current();
  if (!loaded.errors.empty() || !loaded.rules) {
    failure_.inc();
    outcome.status = Status::kRejected;
    outcome.active = previous;
    spdlog::error("rules: {} refused, {} error(s); {}", source, loaded.errors.size(),
                  previous ? "the previous rules (hash " + previous->hash + ") keep serving"
                           : "no rules are active");
    for (const RuleError& error : loaded.errors) {
      spdlog::error("rules: {}", error.toString());
    }
    outcome.errors = std::move(loaded.errors);
    return outcome;
  }
  if (previous && previous->hash == loaded.rules->hash &&
      previous->version == loaded.rules->version) {
    outcome.status = Status::kUnchanged;
    outcome.active = previous;
    spdlog::debug("rules: {} unchanged (hash {})", source, previous->hash);
    return outcome;
  }
  success_.inc();
  {
    static std::atomic<std::uint64_t> next_generation{0};
    std::lock_guard guard(current_mutex_);
    current_ = loaded.rules;
    generation_.store(++next_generation, std::memory_order_release);
  }
  active_.set(static_cast<double>(loaded.rules->limitCount()));
  spdlog::info("rules: loaded {} ({} domain(s), {} limit(s), {} {}, hash {})", source,
               loaded.rules->domains.size(), loaded.rules->limitCount(), loaded.rules->files.size(),
               loaded.rules->version.empty() ? "file(s)" : "resource(s)", loaded.rules->hash);
  outcome.status = Status::kSwapped;
  outcome.active = loaded.rules;
  lock.unlock();

  std::vector<ReloadCallback> callbacks;
  {
    std::lock_guard guard(callbacks_mutex_);
    callbacks = callbacks_;
  }
  for (const ReloadCallback& callback : callbacks) {
    callback(outcome.active);
  }
  return outcome;
}

void RulesWatcher::requestReload() {
  net::post(strand_, [self = shared_from_this()] { self->reloadNow(); });
}

void RulesWatcher::onReload(ReloadCallback callback) {
  std::lock_guard guard(callbacks_mutex_);
  callbacks_.push_back(std::move(callback));
}

void RulesWatcher::start() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->polling_ || self->stopped_.load()) {
      return;
    }
    self->polling_ = true;
    self->schedulePoll(self->options_.poll_interval);
  });
}

void RulesWatcher::stop() {
  stopped_.store(true);
  net::post(strand_, [self = shared_from_this()] {
    self->polling_ = false;
    self->timer_.cancel();
  });
}

void RulesWatcher::schedulePoll(std::chrono::milliseconds delay) {
  timer_.expires_after(delay);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopped_.load()) {
      return;
    }
    self->poll();
  });
}

void RulesWatcher::poll() {
  const std::string fingerprint = rulesFingerprint(options_.path);
  bool changed = false;
  {
    std::lock_guard guard(reload_mutex_);
    changed = fingerprint != loaded_fingerprint_;
  }
  if (!changed) {
    candidate_fingerprint_.clear();
    schedulePoll(options_.poll_interval);
    return;
  }
  if (fingerprint != candidate_fingerprint_) {
    // A fresh change: wait until the files stop moving.
    candidate_fingerprint_ = fingerprint;
    schedulePoll(options_.debounce);
    return;
  }
  candidate_fingerprint_.clear();
  spdlog::info("rules: change detected under {}, reloading", options_.path);
  reloadNow();
  schedulePoll(options_.poll_interval);
}

}  // namespace sluice::app
