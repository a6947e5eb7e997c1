#include "store/redis/key_reset.hpp"

#include <cstddef>
#include <map>
#include <string_view>
#include <utility>

#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice::redis {
namespace {

constexpr std::size_t kResetScanCount = 1000;

/// Glob-escapes a literal for SCAN MATCH.
std::string globEscape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') {
      out += '\\';
    }
    out += ch;
  }
  return out;
}

/// One reset in progress: every node is scanned with every pattern, and what each SCAN
/// page found is unlinked before the next page is asked for.
class KeyReset : public std::enable_shared_from_this<KeyReset> {
 public:
  KeyReset(std::shared_ptr<RedisBackend> backend, std::vector<std::string> patterns,
           std::chrono::milliseconds timeout, Store::ResetCallback done)
      : backend_(std::move(backend)),
        nodes_(backend_->keyNodes()),
        patterns_(std::move(patterns)),
        timeout_(timeout),
        done_(std::move(done)) {}

  void start() {
    if (nodes_.empty()) {
      // A cluster whose topology is not known yet: nothing to scan is not "nothing found".
      finish(redisError(FailureSource::kNotReady, 0, "no Redis node is known yet"));
      return;
    }
    scanNext();
  }

 private:
  using Batches = std::vector<std::vector<std::string>>;

  void scanNext() {
    if (pattern_ >= patterns_.size()) {
      pattern_ = 0;
      ++node_;
    }
    if (node_ >= nodes_.size() || patterns_.empty()) {
      finish(removed_);
      return;
    }
    backend_->command(
        nodes_[node_],
        {"SCAN", cursor_, "MATCH", patterns_[pattern_], "COUNT", std::to_string(kResetScanCount)},
        timeout_, [self = shared_from_this()](Result<Reply> reply) { self->onScanned(reply); });
  }

  void onScanned(Result<Reply>& reply) {
    if (!reply) {
      finish(reply.error());
      return;
    }
    if (reply->type != Reply::Type::kArray || reply->elements.size() != 2) {
      finish(redisError(FailureSource::kProtocol, 0, "SCAN reply"));
      return;
    }
    cursor_ = reply->elements[0].str;
    if (cursor_ == "0") {
      ++pattern_;
    }
    // One UNLINK per hash slot: a cluster refuses multi-key commands across slots.
    const bool clustered = backend_->clustered();
    std::map<int, std::vector<std::string>> by_slot;
    for (const auto& k : reply->elements[1].elements) {
      auto& unlink = by_slot[clustered ? keyHashSlot(k.str) : 0];
      if (unlink.empty()) {
        unlink.push_back("UNLINK");
      }
      unlink.push_back(k.str);
    }
    auto batches = std::make_shared<Batches>();
    for (auto& [slot, unlink] : by_slot) {
      batches->push_back(std::move(unlink));
    }
    unlinkNext(std::move(batches), 0);
  }

  void unlinkNext(std::shared_ptr<Batches> batches, std::size_t index) {
    if (index >= batches->size()) {
      scanNext();
      return;
    }
    backend_->command(nodes_[node_], std::move((*batches)[index]), timeout_,
                      [self = shared_from_this(), batches, index](Result<Reply> r) {
                        if (!r) {
                          self->finish(r.error());
                          return;
                        }
                        self->removed_ += static_cast<std::size_t>(r->integer);
                        self->unlinkNext(batches, index + 1);
                      });
  }

  void finish(Result<std::size_t> result) {
    auto done = std::move(done_);
    done(std::move(result));
  }

  std::shared_ptr<RedisBackend> backend_;
  std::vector<std::string> nodes_;
  std::size_t node_ = 0;
  std::vector<std::string> patterns_;
  std::size_t pattern_ = 0;
  std::string cursor_ = "0";
  std::chrono::milliseconds timeout_;
  std::size_t removed_ = 0;
  Store::ResetCallback done_;
};

}  // namespace

void unlinkKeysWithPrefixes(std::shared_ptr<RedisBackend> backend,
                            const std::vector<std::string>& redis_prefixes,
                            std::chrono::milliseconds timeout, Store::ResetCallback done) {
  std::vector<std::string> patterns;
  patterns.reserve(redis_prefixes.size());
  for (const std::string& prefix : redis_prefixes) {
    patterns.push_back(globEscape(prefix) + "*");
  }
  std::make_shared<KeyReset>(std::move(backend), std::move(patterns), timeout, std::move(done))
      ->start();
}

}  // namespace sluice::redis
