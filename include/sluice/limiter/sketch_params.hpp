#pragma once

#include <cstdint>
#include <memory>
#include <string>

/// The per-rule parameters of the `sketch` algorithm, part of LimitParams
/// (sluice/limiter/sketch.hpp has the algorithm).
namespace sluice {

/// Names the sketch of one rule in a store: shared by every client of the rule, distinct for
/// distinct rules and geometries (a reload that changes the geometry starts a fresh sketch).
struct SketchIdentity {
  std::string key;     ///< key-safe (escapeKeyPart): domain, node path, limit slot, geometry
  std::string domain;  ///< for metric labels
  std::string rule;    ///< the rule's name, for metric labels
};

/// The geometry of one rule's sketch; part of LimitParams (width 0: not a sketch).
struct SketchParams {
  std::uint32_t width = 0;         ///< w: counters per row
  std::uint32_t depth = 0;         ///< d: rows, 1..kMaxSketchDepth
  std::uint32_t counter_bits = 0;  ///< 8, 16 or 32 (sketchCounterBits(L))
  std::uint32_t bloom_bits = 0;    ///< m: bits of each window's Bloom filter; 0 = no Bloom gate
  std::uint32_t bloom_hashes = 0;  ///< k: bits set per client, 1..kMaxBloomHashes
  std::shared_ptr<const SketchIdentity> identity;
};

}  // namespace sluice
