#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/limiter/sketch.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_connection.hpp"

/// How the Redis stores keep `sketch` limits (src/store/redis/lua/60_sketch.lua): names of
/// the two window strings, the seed key, the script arguments, and the Redis Cluster layout.
/// Private to the Redis stores and their tests.
namespace sluice::redis {

/// The key holding the sketch hash seed (32 hex digits), shared by every sidecar of one
/// Redis: "<prefix>:sketch-seed". The first sidecar sets it (SET NX).
std::string sketchSeedKey(std::string_view prefix);

/// A random candidate seed, 32 hex digits.
std::string randomSketchSeed();

/// The hasher of the seed Redis answered for `key` (sketchSeedKey()), or a protocol error
/// naming the key when the reply is not 32 hex digits.
Result<std::shared_ptr<const SketchHasher>> sketchHasherFromReply(const Reply& reply,
                                                                  std::string_view key);

/// Columns per row of one hash slot's shard in Redis Cluster: ceil(w / 16384), at least 16.
/// A client only ever touches the shard of its own slot, so the shards together act like one
/// sketch of 16384 x that width.
std::uint32_t clusterShardWidth(std::uint32_t width);

/// A hash tag (the text between '{' and '}') whose slot is `slot` (0..16383).
const std::string& slotTag(int slot);

/// Where one sketch limit of a request lives and what the script needs of it.
struct SketchPlacement {
  std::string even_key;   ///< the string of even window indices
  std::string odd_key;    ///< the string of odd window indices
  SketchParams geometry;  ///< width is the shard's in a cluster
};

/// The two strings of `limit`'s sketch for the seed `fingerprint`:
/// "<prefix>:{<tag>}:sk:<fingerprint>:<identity key>[:s<shard width>]:<parity>". `tag` is
/// empty on one Redis; in a cluster it is slotTag(slot of the request's other keys).
SketchPlacement placeSketch(std::string_view prefix, const StoreLimit& limit,
                            std::string_view fingerprint, bool clustered, int slot);

/// Appends the script's cells arguments for one client (60_sketch.lua): bits, depth, width,
/// bloom bits, bloom hashes, the columns, the Bloom bit positions.
void appendSketchCells(std::vector<std::string>& args, const SketchParams& geometry,
                       const SketchCells& cells);

}  // namespace sluice::redis
