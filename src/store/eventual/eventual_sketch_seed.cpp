// The eventual engine's sketch seeding: the hash seed every sidecar of every region shares,
// and the cell keys of a sketch limit (docs/eventual.md, "sketch").
#include <spdlog/spdlog.h>

#include "sluice/rules/bucket_key.hpp"
#include "store/eventual/eventual_engine.hpp"
#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_sketch.hpp"

namespace sluice {

void EventualEngine::setSketchHasher(std::shared_ptr<const SketchHasher> hasher) {
  std::lock_guard lock(sketch_mutex_);
  if (!sketch_hasher_) {
    sketch_hasher_ = std::move(hasher);
  }
}

std::shared_ptr<const SketchHasher> EventualEngine::sketchHasher() const {
  std::lock_guard lock(sketch_mutex_);
  return sketch_hasher_;
}

void EventualEngine::fetchSketchSeed(std::function<void(Status)> done) {
  executor_.post([this, done = std::move(done)]() mutable {
    if (sketchHasher()) {
      done({});
      return;
    }
    const std::string key = redis::sketchSeedKey(redis_prefix_);
    auto on_reply = [this, key, done = std::move(done)](Result<redis::Reply> reply) mutable {
      if (!reply) {
        done(reply.error());
        return;
      }
      auto hasher = redis::sketchHasherFromReply(*reply, key);
      if (!hasher) {
        done(hasher.error());
        return;
      }
      if (!sketchHasher()) {
        spdlog::info("eventual sketch: hash seed {} from Redis", (*hasher)->fingerprint());
        setSketchHasher(std::move(*hasher));
      }
      done({});
    };
    std::vector<std::string> args = {"sketch-seed", redis::randomSketchSeed()};
    if (Region* home = seedRegion()) {
      // One Redis, or the master of the seed key's slot of that region's cluster.
      home->backend->evalScript({key}, std::move(args), home->config.redis.request_timeout,
                                std::move(on_reply));
    } else {
      backend_->evalScript({key}, std::move(args), local_.request_timeout, std::move(on_reply));
    }
  });
}

EventualEngine::Region* EventualEngine::seedRegion() {
  Region* home = nullptr;
  for (auto& region : regions_) {
    if (region->config.name < options_.region &&
        (home == nullptr || region->config.name < home->config.name)) {
      home = region.get();
    }
  }
  return home;
}

bool EventualEngine::isSketch(const StoreLimit& limit) {
  return limit.params.algorithm == Algorithm::kSketch && limit.params.sketch.identity &&
         limit.params.sketch.width > 0 && limit.params.sketch.depth > 0 &&
         limit.params.sketch.depth <= kMaxSketchDepth;
}

std::string EventualEngine::sketchTag(const SketchParams& geometry) {
  // "ske." + the CRC16 of the rule's identity, 4 hex digits: stable across sidecars and
  // versions, and one hash tag per rule (BucketKey::redisKey tags a key without a client by
  // what precedes its first ':').
  static constexpr char kHex[] = "0123456789abcdef";
  const std::uint16_t crc = redis::crc16(geometry.identity->key);
  std::string tag = "ske.";
  for (int shift = 12; shift >= 0; shift -= 4) {
    tag += kHex[(crc >> shift) & 0xF];
  }
  return tag;
}

std::vector<std::string> EventualEngine::sketchCellKeys(const SketchHasher& hasher,
                                                        const StoreLimit& limit) {
  const SketchParams& geometry = limit.params.sketch;
  const SketchCells cells = hasher.cells(limit.key, geometry.width, geometry.depth, 0, 0);
  std::string base = sketchTag(geometry);
  base += ':';
  base += hasher.fingerprint();
  base += ':';
  base += geometry.identity->key;  // names the rule and its geometry (w, d, ...)
  base += ':';
  std::vector<std::string> keys;
  keys.reserve(geometry.depth);
  for (std::uint32_t row = 0; row < geometry.depth; ++row) {
    keys.push_back(base + std::to_string(row) + '.' + std::to_string(cells.columns[row]));
  }
  return keys;
}

int EventualEngine::clusterSlotOf(const EventualLimitRef& ref) const {
  // A sketch's cells are named sketchTag() ":..." (sketchCellKeys): they share its hash tag.
  const bool cells = isSketch(*ref.limit) && sketchHasher() != nullptr;
  return redis::keyHashSlot(BucketKey::redisKey(
      redis_prefix_, cells ? sketchTag(ref.limit->params.sketch) : std::string(ref.key())));
}

}  // namespace sluice
