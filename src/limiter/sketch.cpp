#include "sluice/limiter/sketch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "limiter/algorithms.hpp"

namespace sluice {

// sketch (docs/algorithms.md, docs/sketch.md). For one client, with C and P the minimum of its d
// counters in the current and the previous window's sketch (a saturated counter reads as
// 2^53; a sketch stamped with another window reads as 0; with the Bloom gate, a client in
// neither window's filter reads C = P = 0):
//   the outcome is sliding_window_counter's on the state (a = window start, b = C, c = P):
//   the same IEEE double estimate P * (W - elapsed) / W + C, the same decision, remaining,
//   retry_after and reset_after (see sliding_window_counter.cpp);
//   recorded (allowed, or count_rejected; not for a check or `never`): each of the client's
//   counters in the current sketch becomes max(counter, C + cost), saturating at its width's
//   largest value; its Bloom bits are set; the window's charged total grows by cost.
// Why it never over-admits: every counter of a client is >= the client's true count in that
// window (by induction: the first write of a window raises it to C + cost >= true + cost), so
// C >= true C and P >= true P, and the predicate estimate + cost <= L only gets stricter as
// P and C grow. For the same reason remaining is a lower bound and retry_after an upper bound.

namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

/// SipHash-2-4 (Aumasson, Bernstein), 64-bit output.
std::uint64_t sipHash24(std::uint64_t k0, std::uint64_t k1, std::string_view data) {
  std::uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
  std::uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
  std::uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
  std::uint64_t v3 = 0x7465646279746573ULL ^ k1;
  const auto round = [&] {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  };
  const std::size_t n = data.size();
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t whole = n - n % 8;
  for (std::size_t i = 0; i < whole; i += 8) {
    std::uint64_t m = 0;
    for (int b = 7; b >= 0; --b) {
      m = (m << 8) | p[i + static_cast<std::size_t>(b)];
    }
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  std::uint64_t last = static_cast<std::uint64_t>(n & 0xff) << 56;
  for (std::size_t i = whole; i < n; ++i) {
    last |= static_cast<std::uint64_t>(p[i]) << (8 * (i - whole));
  }
  v3 ^= last;
  round();
  round();
  v0 ^= last;
  v2 ^= 0xff;
  round();
  round();
  round();
  round();
  return v0 ^ v1 ^ v2 ^ v3;
}

/// MurmurHash3's 64-bit finalizer: a bijection with full avalanche.
constexpr std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// floor(x * n / 2^64): an unbiased-enough map of a 64-bit hash onto [0, n) without division.
std::uint32_t fastrange(std::uint64_t x, std::uint32_t n) {
  // (x * n) >> 64 from 32-bit halves: n < 2^32, so the high word is exact.
  const std::uint64_t lo = (x & 0xffffffffULL) * n;
  const std::uint64_t hi = (x >> 32) * n;
  return static_cast<std::uint32_t>((hi + (lo >> 32)) >> 32);
}

}  // namespace

std::uint32_t sketchCounterBits(std::int64_t limit) {
  for (const std::uint32_t bits : {8U, 16U, 32U}) {
    if (limit < sketchCounterMax(bits)) {
      return bits;
    }
  }
  return 0;
}

std::uint32_t sketchWidthFor(std::int64_t expected_requests, std::int64_t limit) {
  if (expected_requests <= 0 || limit <= 0) {
    return 64;
  }
  const double w = std::ceil(static_cast<double>(expected_requests) /
                             (kSketchTargetLoad * static_cast<double>(limit)));
  return static_cast<std::uint32_t>(std::clamp(w, 64.0, static_cast<double>(kMaxSketchWidth)));
}

std::uint32_t sketchBloomBits(std::int64_t expected_clients) {
  const double ln2 = std::log(2.0);
  const double m = std::ceil(-static_cast<double>(std::max<std::int64_t>(expected_clients, 1)) *
                             std::log(0.01) / (ln2 * ln2));
  return static_cast<std::uint32_t>(std::clamp(m, 64.0, static_cast<double>(1U << 31)));
}

std::size_t sketchStateBytes(const SketchParams& params) {
  const std::size_t counters =
      static_cast<std::size_t>(params.width) * params.depth * (params.counter_bits / 8);
  const std::size_t bloom = (static_cast<std::size_t>(params.bloom_bits) + 63) / 64 * 8;
  return 2 * (counters + bloom + 24);
}

std::int64_t sketchWindowIndex(Micros now, Micros window) {
  return limiter_detail::floorDiv(now, window);
}

SketchHasher::SketchHasher(std::uint64_t k0, std::uint64_t k1) : k0_(k0), k1_(k1) {
  // Per-row and per-Bloom-bit keys from the seed: independent of the key being hashed.
  std::uint64_t state = sipHash24(k0, k1, "sluice-sketch-rows");
  for (auto& key : row_keys_) {
    key = splitmix64(state);
  }
  for (auto& key : bloom_keys_) {
    key = splitmix64(state);
  }
  const std::uint64_t fp = sipHash24(k0, k1, "sluice-sketch-fingerprint");
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    fingerprint_ += kHex[(fp >> (60 - 4 * i)) & 0xf];
  }
}

bool SketchHasher::parseSeed(std::string_view hex, std::uint64_t& k0, std::uint64_t& k1) {
  if (hex.size() != 32) {
    return false;
  }
  std::uint64_t parts[2] = {0, 0};
  for (std::size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    int v = 0;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return false;
    }
    parts[i / 16] = (parts[i / 16] << 4) | static_cast<std::uint64_t>(v);
  }
  k0 = parts[0];
  k1 = parts[1];
  return true;
}

std::string SketchHasher::formatSeed(std::uint64_t k0, std::uint64_t k1) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const std::uint64_t part : {k0, k1}) {
    for (int i = 0; i < 16; ++i) {
      out += kHex[(part >> (60 - 4 * i)) & 0xf];
    }
  }
  return out;
}

std::uint64_t SketchHasher::hash(std::string_view key) const { return sipHash24(k0_, k1_, key); }

SketchCells SketchHasher::cells(std::string_view key, std::uint32_t width, std::uint32_t depth,
                                std::uint32_t bloom_bits, std::uint32_t bloom_hashes) const {
  const std::uint64_t h = hash(key);
  SketchCells cells;
  depth = std::min(depth, kMaxSketchDepth);
  for (std::uint32_t r = 0; r < depth; ++r) {
    cells.columns[r] = fastrange(fmix64(h ^ row_keys_[r]), width);
  }
  if (bloom_bits > 0) {
    bloom_hashes = std::min(bloom_hashes, kMaxBloomHashes);
    for (std::uint32_t j = 0; j < bloom_hashes; ++j) {
      cells.bloom[j] = fastrange(fmix64(h ^ bloom_keys_[j]), bloom_bits);
    }
  }
  return cells;
}

SketchEvaluation evaluateSketch(const LimitParams& params, const SketchRead& read, Micros now,
                                std::int64_t cost) {
  cost = std::max<std::int64_t>(cost, 0);
  const Micros start = limiter_detail::windowStart(now, params.window_us);
  BucketState state;
  state.a = start;
  state.b = read.seen ? read.curr : 0;
  state.c = read.seen ? read.prev : 0;
  LimitParams swc = params;
  swc.algorithm = Algorithm::kSlidingWindowCounter;
  const Evaluation e = limiter_detail::evaluateSlidingWindowCounter(swc, state, now, cost);
  SketchEvaluation out;
  out.outcome = e.outcome;
  out.ttl_us = start + 2 * params.window_us - now;
  // A check or a `never` request writes nothing; otherwise the store records this attempt
  // when it is charged (allowed request, or count_rejected).
  out.record = cost > 0 && !e.outcome.never;
  out.raise_to = state.b + cost;
  return out;
}

SketchTable::SketchTable(const SketchParams& params, std::int64_t limit, SketchVariant variant)
    : params_(params),
      limit_(limit),
      variant_(variant),
      bytes_per_counter_(std::max<std::uint32_t>(params.counter_bits / 8, 1)) {
  const std::size_t counters = static_cast<std::size_t>(params.width) * params.depth;
  for (Window& w : windows_) {
    w.counters.assign(counters * bytes_per_counter_, 0);
    w.bloom.assign((static_cast<std::size_t>(params.bloom_bits) + 63) / 64, 0);
  }
}

std::int64_t SketchTable::counter(const Window& window, std::size_t index) const {
  const std::uint8_t* p = window.counters.data() + index * bytes_per_counter_;
  switch (bytes_per_counter_) {
    case 1:
      return p[0];
    case 2: {
      std::uint16_t v = 0;
      std::memcpy(&v, p, 2);
      return v;
    }
    default: {
      std::uint32_t v = 0;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
}

void SketchTable::setCounter(Window& window, std::size_t index, std::int64_t value) {
  std::uint8_t* p = window.counters.data() + index * bytes_per_counter_;
  switch (bytes_per_counter_) {
    case 1:
      p[0] = static_cast<std::uint8_t>(value);
      break;
    case 2: {
      const auto v = static_cast<std::uint16_t>(value);
      std::memcpy(p, &v, 2);
      break;
    }
    default: {
      const auto v = static_cast<std::uint32_t>(value);
      std::memcpy(p, &v, 4);
      break;
    }
  }
}

const SketchTable::Window* SketchTable::windowAt(std::int64_t window_index) const {
  const Window& w = windows_[static_cast<std::size_t>(window_index & 1)];
  return w.stamp == window_index ? &w : nullptr;
}

SketchRead SketchTable::read(const SketchCells& cells, std::int64_t window_index) const {
  SketchRead out;
  const Window* curr = windowAt(window_index);
  const Window* prev = variant_.sliding ? windowAt(window_index - 1) : nullptr;
  if (params_.bloom_bits > 0) {
    const auto in = [&](const Window* w) {
      if (w == nullptr) {
        return false;
      }
      for (std::uint32_t j = 0; j < params_.bloom_hashes; ++j) {
        const std::uint32_t bit = cells.bloom[j];
        if (((w->bloom[bit / 64] >> (bit % 64)) & 1U) == 0) {
          return false;
        }
      }
      return true;
    };
    out.seen = in(curr) || in(prev);
    if (!out.seen) {
      return out;
    }
  }
  const auto minimum = [&](const Window* w) -> std::int64_t {
    if (w == nullptr) {
      return 0;
    }
    std::int64_t m = kSketchSaturatedCount;
    for (std::uint32_t r = 0; r < params_.depth; ++r) {
      const std::size_t index = static_cast<std::size_t>(r) * params_.width + cells.columns[r];
      m = std::min(m, sketchCounterValue(counter(*w, index), params_.counter_bits));
    }
    return m;
  };
  out.curr = minimum(curr);
  out.prev = minimum(prev);
  return out;
}

void SketchTable::record(const SketchCells& cells, std::int64_t window_index, std::int64_t raise_to,
                         std::int64_t cost) {
  Window& w = windows_[static_cast<std::size_t>(window_index & 1)];
  if (w.stamp != window_index) {
    std::fill(w.counters.begin(), w.counters.end(), 0);
    std::fill(w.bloom.begin(), w.bloom.end(), 0);
    w.stamp = window_index;
    w.charged = 0;
    w.saturated = 0;
  }
  const std::int64_t top = sketchCounterMax(params_.counter_bits);
  for (std::uint32_t r = 0; r < params_.depth; ++r) {
    const std::size_t index = static_cast<std::size_t>(r) * params_.width + cells.columns[r];
    const std::int64_t old = counter(w, index);
    std::int64_t next = variant_.conservative ? std::max(old, raise_to) : old + cost;
    next = std::min(next, top);
    if (next != old) {
      setCounter(w, index, next);
      if (old < limit_ && next >= limit_) {
        ++w.saturated;
      }
    }
  }
  for (std::uint32_t j = 0; j < params_.bloom_hashes && params_.bloom_bits > 0; ++j) {
    const std::uint32_t bit = cells.bloom[j];
    w.bloom[bit / 64] |= std::uint64_t{1} << (bit % 64);
  }
  w.charged += cost;
}

double SketchTable::load(std::int64_t window_index) const {
  const Window* w = windowAt(window_index);
  if (w == nullptr || params_.width == 0 || limit_ <= 0) {
    return 0;
  }
  return static_cast<double>(w->charged) /
         (static_cast<double>(params_.width) * static_cast<double>(limit_));
}

double SketchTable::saturatedShare(std::int64_t window_index) const {
  const Window* w = windowAt(window_index);
  const double cells = static_cast<double>(params_.width) * params_.depth;
  if (w == nullptr || cells <= 0) {
    return 0;
  }
  return static_cast<double>(w->saturated) / cells;
}

std::size_t SketchTable::bytes() const {
  std::size_t total = 0;
  for (const Window& w : windows_) {
    total += w.counters.size() + w.bloom.size() * 8;
  }
  return total;
}

}  // namespace sluice
