#include "http/fast_decision_parser.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <utility>
#include <vector>

#include "http/decision_codec.hpp"
#include "sluice/common/words.hpp"

namespace sluice::http {
namespace {

/// Bytes a string of the fast path holds as they are: printable ASCII but '"' and '\\'.
constexpr auto kPlain = [] {
  std::array<bool, 256> table{};
  for (std::size_t c = 0x20; c < 0x80; ++c) {
    table[c] = c != '"' && c != '\\';
  }
  return table;
}();

/// True when the `n` bytes at `p` (n >= 8), which hold no '"', are all kPlain: no byte
/// under 0x20, at or over 0x80, or '\\'. Eight at a time (the last word overlaps the one
/// before it), with the usual tests for a zero byte and a byte under 0x20: each is never
/// zero on a word that holds such a byte.
bool allPlainRun(const char* p, std::size_t n) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
  const auto flagged = [](std::uint64_t v) {
    const std::uint64_t escape = v ^ ('\\' * kOnes);
    return v | ((v - 0x20 * kOnes) & ~v) | ((escape - kOnes) & ~escape);
  };
  std::uint64_t any = flagged(words::load(p + n - 8));
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    any |= flagged(words::load(p + i));
  }
  return (any & kHighs) == 0;
}

/// `name == literal`, the literal's length known here (no call to memcmp: a short one the
/// compiler expands, a name of 8 to 16 bytes is two overlapping words).
template <std::size_t N>
bool is(std::string_view name, const char (&literal)[N]) {
  constexpr std::size_t n = N - 1;
  if constexpr (n >= 8 && n <= 16) {
    return name.size() == n && words::load(name.data()) == words::load(literal) &&
           words::load(name.data() + n - 8) == words::load(literal + n - 8);
  } else {
    return name.size() == n && std::memcmp(name.data(), literal, n) == 0;
  }
}

/// is() for the names of a body's own fields, which the compiler does not always expand:
/// a name of 4 to 7 bytes is two overlapping 4-byte words.
template <std::size_t N>
bool isField(std::string_view name, const char (&literal)[N]) {
  constexpr std::size_t n = N - 1;
  if constexpr (n >= 4 && n < 8) {
    if (name.size() != n) {
      return false;
    }
    std::uint32_t head = 0;
    std::uint32_t tail = 0;
    std::uint32_t literal_head = 0;
    std::uint32_t literal_tail = 0;
    std::memcpy(&head, name.data(), 4);
    std::memcpy(&tail, name.data() + n - 4, 4);
    std::memcpy(&literal_head, literal, 4);
    std::memcpy(&literal_tail, literal + n - 4, 4);
    return head == literal_head && tail == literal_tail;
  } else {
    return is(name, literal);
  }
}

/// A cursor over the body. Every method returns false where the complete parser is needed.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  void skipSpace() {
    while (p_ != end_) {
      char c = *p_;
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      ++p_;
    }
  }

  /// Skips whitespace, then consumes `c` if it is next. `c` is never whitespace: when it is
  /// next (bodies are usually compact), there is no whitespace to skip.
  bool consume(char c) {
    if (p_ != end_ && *p_ == c) {
      ++p_;
      return true;
    }
    skipSpace();
    if (p_ != end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  bool peek(char c) {
    skipSpace();
    return p_ != end_ && *p_ == c;
  }

  /// A string of printable ASCII without escapes, at most kMaxStringBytes long. Its bytes
  /// are looked at eight at a time while eight are left (plainEnd()), then one at a time.
  bool string(std::string_view& out) {
    if (!consume('"')) {
      return false;
    }
    const char* const start = p_;
    p_ = plainEnd(p_);
    if (p_ == end_ || *p_ != '"') {
      return false;  // the end, an escape, a control or non-ASCII byte
    }
    out = std::string_view(start, static_cast<std::size_t>(p_ - start));
    ++p_;
    return out.size() <= kMaxStringBytes;
  }

  /// string() for a value that is usually long (a reservation id): its closing quote found
  /// with memchr, then the bytes before it checked eight at a time (allPlainRun); anything
  /// else byte by byte. The same strings, the same answer.
  bool longString(std::string_view& out) {
    if (!consume('"')) {
      return false;
    }
    const char* const start = p_;
    if (const void* quote = std::memchr(start, '"', static_cast<std::size_t>(end_ - start))) {
      const auto n = static_cast<std::size_t>(static_cast<const char*>(quote) - start);
      if (n >= 8 && allPlainRun(start, n)) {
        out = std::string_view(start, n);
        p_ += n + 1;
        return n <= kMaxStringBytes;
      }
    }
    const char* p = start;
    while (p != end_ && kPlain[static_cast<unsigned char>(*p)]) {
      ++p;
    }
    p_ = p;
    if (p == end_ || *p != '"') {
      return false;  // the end, an escape, a control or non-ASCII byte
    }
    out = std::string_view(start, static_cast<std::size_t>(p - start));
    ++p_;
    return out.size() <= kMaxStringBytes;
  }

  /// An integer in [0, kMaxHits] written as JSON spells it (no sign, fraction, exponent or
  /// leading zero).
  bool count(std::int64_t& out) {
    skipSpace();
    const char* const start = p_;
    std::int64_t v = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      v = v * 10 + (*p_ - '0');
      ++p_;
      if (p_ - start > 10) {
        return false;
      }
    }
    const auto n = p_ - start;
    if (n == 0 || (n > 1 && *start == '0') || v > kMaxHits) {
      return false;
    }
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {
      return false;
    }
    out = v;
    return true;
  }

  bool atEnd() {
    skipSpace();
    return p_ == end_;
  }

 private:
  /// The first byte from `p` that is not kPlain (the closing quote, an escape, a control or
  /// non-ASCII byte), or the end. Sixteen bytes at a time where SSE2 is (x86-64 always), then
  /// eight at a time, then one at a time. A word's flags (words::kHighs of each byte that is '"',
  /// '\\', under 0x20 or at or over 0x80) are exact for its lowest flagged byte: a borrow that
  /// may flag the bytes above it comes only from a byte that is flagged.
  const char* plainEnd(const char* p) const {
    using words::kHighs;
    using words::kOnes;
#if defined(__SSE2__)
    // Sixteen at a time first: as signed bytes, those at or over 0x80 are under 0x20 too.
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i escape = _mm_set1_epi8('\\');
    while (end_ - p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m128i flags =
          _mm_or_si128(_mm_cmplt_epi8(v, space),
                       _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, escape)));
      if (const auto mask = static_cast<unsigned>(_mm_movemask_epi8(flags)); mask != 0) {
        return p + std::countr_zero(mask);
      }
      p += 16;
    }
#endif
    while (end_ - p >= 8) {
      const std::uint64_t v = words::load(p);
      const std::uint64_t quote = v ^ ('"' * kOnes);
      const std::uint64_t escape = v ^ ('\\' * kOnes);
      const std::uint64_t flags = (v | ((v - 0x20 * kOnes) & ~v) | ((quote - kOnes) & ~quote) |
                                   ((escape - kOnes) & ~escape)) &
                                  kHighs;
      if (flags != 0) {
        return p + std::countr_zero(flags) / 8;
      }
      p += 8;
    }
    while (p != end_ && kPlain[static_cast<unsigned char>(*p)]) {
      ++p;
    }
    return p;
  }

  const char* p_;
  const char* end_;
};

/// `{"key": "...", "value": "..."}` with both fields, each once.
bool entry(Scanner& s, Entry& out) {
  if (!s.consume('{')) {
    return false;
  }
  bool has_key = false;
  bool has_value = false;
  do {
    std::string_view name;
    std::string_view text;
    if (!s.string(name) || !s.consume(':') || !s.string(text)) {
      return false;
    }
    if (is(name, "key") && !has_key && !text.empty()) {
      out.key.assign(text);
      has_key = true;
    } else if (is(name, "value") && !has_value) {
      out.value.assign(text);
      has_value = true;
    } else {
      return false;
    }
  } while (s.consume(','));
  return s.consume('}') && has_key && has_value;
}

/// The next element of `items` to fill, reusing one a spare request left (its strings keep
/// their capacity); `used` counts those filled.
template <typename T>
T& reuseNext(std::vector<T>& items, std::size_t& used) {
  if (used == items.size()) {
    items.emplace_back();
  }
  return items[used++];
}

/// A non-empty array of at most kMaxEntries entries.
bool entries(Scanner& s, Descriptor& out) {
  if (!s.consume('[')) {
    return false;
  }
  std::size_t used = 0;
  do {
    if (used == kMaxEntries) {
      return false;
    }
    if (!entry(s, reuseNext(out, used))) {
      return false;
    }
  } while (s.consume(','));
  out.resize(used);
  return s.consume(']');
}

/// `[entries...]` or `{"entries": [...], "hits_addend": n}` (either spelling, once).
/// Envoy's API (`envoy`) has only the object.
bool descriptor(Scanner& s, Descriptor& out, std::optional<std::int64_t>& hits, bool envoy) {
  if (s.peek('[')) {
    return !envoy && entries(s, out);
  }
  if (!s.consume('{')) {
    return false;
  }
  bool has_entries = false;
  do {
    std::string_view name;
    if (!s.string(name) || !s.consume(':')) {
      return false;
    }
    if (is(name, "entries") && !has_entries) {
      if (!entries(s, out)) {
        return false;
      }
      has_entries = true;
    } else if ((is(name, "hits_addend") || is(name, "hitsAddend")) && !hits) {
      std::int64_t v = 0;
      if (!s.count(v)) {
        return false;
      }
      hits = v;
    } else {
      return false;
    }
  } while (s.consume(','));
  return s.consume('}') && has_entries;
}

bool descriptors(Scanner& s, DecisionRequest& request, bool envoy) {
  if (!s.consume('[')) {
    return false;
  }
  if (s.consume(']')) {
    request.descriptors.clear();
    return true;
  }
  bool any_hits = false;
  std::size_t used = 0;
  do {
    if (used == kMaxDescriptors) {
      return false;
    }
    std::optional<std::int64_t> hits;
    if (!descriptor(s, reuseNext(request.descriptors, used), hits, envoy)) {
      return false;
    }
    // Kept per descriptor from the first one that has its own (most requests have none).
    if (hits && !any_hits) {
      any_hits = true;
      request.descriptor_hits.resize(used - 1);
    }
    if (any_hits) {
      request.descriptor_hits.push_back(hits);
    }
  } while (s.consume(','));
  request.descriptors.resize(used);
  if (!any_hits) {
    request.descriptor_hits.clear();
  }
  return s.consume(']');
}

/// The fields of one object already read: each is accepted once (a repeated field goes to
/// the complete parser, which words the error).
class SeenFields {
 public:
  bool first(unsigned field) {
    const bool fresh = (seen_ & field) == 0;
    seen_ |= field;
    return fresh;
  }
  bool has(unsigned field) const { return (seen_ & field) != 0; }

 private:
  unsigned seen_ = 0;
};

/// A request's `domain`: a non-empty string.
bool readDomain(Scanner& s, DecisionRequest& request) {
  std::string_view text;
  const bool read = s.string(text) && !text.empty();
  request.domain.assign(text);
  return read;
}

/// One whole body that is a JSON object: calls `field(name)` with the scanner on each
/// member's value (the field consumes it; false rejects the body). True when the object is
/// well formed and nothing follows it.
template <typename Field>
bool objectBody(Scanner& s, Field field) {
  if (!s.consume('{')) {
    return false;
  }
  if (!s.consume('}')) {
    do {
      std::string_view name;
      if (!s.string(name) || !s.consume(':') || !field(name)) {
        return false;
      }
    } while (s.consume(','));
    if (!s.consume('}')) {
      return false;
    }
  }
  return s.atEnd();
}

/// The fields of a Sluice body (SeenFields bits): those every endpoint takes, then those of
/// /shouldAllowRequest and of the reservation steps.
enum : unsigned {
  kDomainField = 1,
  kClientField = 2,
  kDescriptorsField = 4,
  kTimestampField = 8,
  kHitsField = 16,
  kAmountField = 32,
  kTtlField = 64,
  kIdField = 128,
  kActualField = 256,
};

/// Reads the value of `name` into `request` when it is a field every Sluice body has
/// (domain, clientId, descriptors, timestamp); any other goes to `other(name)`.
template <typename Other>
bool sluiceField(Scanner& s, std::string_view name, SeenFields& seen, DecisionRequest& request,
                 Other other) {
  if (isField(name, "domain")) {
    return seen.first(kDomainField) && readDomain(s, request);
  }
  if (isField(name, "clientId")) {
    std::string_view text;
    const bool read = seen.first(kClientField) && s.string(text);
    request.client_id.assign(text);
    return read;
  }
  if (isField(name, "descriptors")) {
    return seen.first(kDescriptorsField) && descriptors(s, request, false);
  }
  if (isField(name, "timestamp")) {
    std::string_view text;
    return seen.first(kTimestampField) && s.string(text) && isIso8601DateTime(text);
  }
  return other(name);
}

/// The defaults of the fields a body left out.
void finishSluiceFields(const SeenFields& seen, std::string_view default_domain,
                        DecisionRequest& request) {
  if (!seen.has(kDomainField)) {
    request.domain.assign(default_domain);
  }
  if (!seen.has(kDescriptorsField)) {
    request.descriptors.clear();
  }
}

}  // namespace

std::optional<DecisionRequest> parseDecisionRequestFast(std::string_view body,
                                                        std::string_view default_domain) {
  // This thread's spare (decision_service.hpp): its descriptors are reused, then trimmed.
  DecisionRequest request = takeSpareRequest();
  if (!parseDecisionRequestFastInto(body, default_domain, request)) {
    return std::nullopt;
  }
  return request;
}

bool parseDecisionRequestFastInto(std::string_view body, std::string_view default_domain,
                                  DecisionRequest& request) {
  Scanner s(body);
  SeenFields seen;
  const bool ok = objectBody(s, [&](std::string_view name) {
    return sluiceField(s, name, seen, request, [&](std::string_view other) {
      return is(other, "hits") && seen.first(kHitsField) && s.count(request.hits);
    });
  });
  if (!ok) {
    return false;
  }
  finishSluiceFields(seen, default_domain, request);
  return true;
}

namespace {

/// parseReservationRequestFastInto() for one step, known here.
template <HoldOp kOp>
bool parseStepInto(std::string_view body, std::string_view default_domain,
                   DecisionRequest& request) {
  Scanner s(body);
  SeenFields seen;
  std::int64_t amount = 0;
  std::int64_t ttl_ms = 0;
  const auto step_field = [&](std::string_view name) {
    if constexpr (kOp == HoldOp::kReserve) {
      if (isField(name, "amount") && seen.first(kAmountField)) {
        return s.count(amount) && amount >= 1;
      }
      return isField(name, "ttl_ms") && seen.first(kTtlField) && s.count(ttl_ms) && ttl_ms >= 1;
    } else {
      if (isField(name, "reservation_id") && seen.first(kIdField)) {
        std::string_view text;
        const bool read = s.longString(text);
        request.reservation.id.assign(text);
        return read;
      }
      return kOp == HoldOp::kCommit && isField(name, "actual") && seen.first(kActualField) &&
             s.count(amount);
    }
  };
  const bool ok = objectBody(
      s, [&](std::string_view name) { return sluiceField(s, name, seen, request, step_field); });
  // A required field missing is an error, which the complete parser words.
  bool complete = false;
  if constexpr (kOp == HoldOp::kReserve) {
    complete = seen.has(kAmountField);
  } else if constexpr (kOp == HoldOp::kCommit) {
    complete = seen.has(kIdField) && seen.has(kActualField);
  } else {
    complete = seen.has(kIdField);
  }
  if (!ok || !complete) {
    return false;
  }
  finishSluiceFields(seen, default_domain, request);
  request.hits = amount;
  request.reservation.op = kOp;
  request.reservation.ttl_us = ttl_ms * 1000;
  return true;
}

}  // namespace

bool parseReservationRequestFastInto(std::string_view body, HoldOp op,
                                     std::string_view default_domain, DecisionRequest& request) {
  switch (op) {
    case HoldOp::kReserve:
      return parseStepInto<HoldOp::kReserve>(body, default_domain, request);
    case HoldOp::kCommit:
      return parseStepInto<HoldOp::kCommit>(body, default_domain, request);
    case HoldOp::kRelease:
      return parseStepInto<HoldOp::kRelease>(body, default_domain, request);
    case HoldOp::kNone:
      break;
  }
  return false;
}

std::optional<DecisionRequest> parseEnvoyRequestFast(std::string_view body) {
  DecisionRequest request = takeSpareRequest();
  if (!parseEnvoyRequestFastInto(body, request)) {
    return std::nullopt;
  }
  return request;
}

bool parseEnvoyRequestFastInto(std::string_view body, DecisionRequest& request) {
  Scanner s(body);
  enum : unsigned { kDomain = 1, kDescriptors = 2, kHits = 4 };
  SeenFields seen;
  const bool ok = objectBody(s, [&](std::string_view name) {
    if (is(name, "domain") && seen.first(kDomain)) {
      return readDomain(s, request);
    }
    if (is(name, "descriptors") && seen.first(kDescriptors)) {
      return descriptors(s, request, true);
    }
    if ((is(name, "hits_addend") || is(name, "hitsAddend")) && seen.first(kHits)) {
      const bool read = s.count(request.hits);
      request.hits = std::max<std::int64_t>(1, request.hits);
      return read;
    }
    return false;
  });
  // Both fields are required: their absence is an error, which the complete parser words.
  return ok && seen.has(kDomain) && !request.descriptors.empty();
}

// The fast path, and the complete parser where it cannot answer (decision_codec.hpp).

Status parseDecisionRequestInto(std::string_view body, std::string_view default_domain,
                                DecisionRequest& request) {
  if (parseDecisionRequestFastInto(body, default_domain, request)) {
    return {};
  }
  Result<DecisionRequest> complete = parseDecisionRequestComplete(body, default_domain);
  if (!complete) {
    return complete.error();
  }
  request = std::move(*complete);
  return {};
}

Status parseEnvoyRequestInto(std::string_view body, DecisionRequest& request) {
  if (parseEnvoyRequestFastInto(body, request)) {
    request.envoy_api = true;
    return {};
  }
  Result<DecisionRequest> complete = parseEnvoyRequestComplete(body);
  if (!complete) {
    return complete.error();
  }
  request = std::move(*complete);
  request.envoy_api = true;
  return {};
}

}  // namespace sluice::http
