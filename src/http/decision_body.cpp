#include "http/decision_body.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sluice/common/json_writer.hpp"
#include "sluice/common/words.hpp"
#include "sluice/decision/rate_limit_headers.hpp"

namespace sluice::http {
namespace {

struct PreparedLimitsJson {
  static constexpr std::size_t kEntries = 8;
  std::array<PreparedLimitJson, kEntries> entries;
  std::size_t next = 0;  // the entry a miss rewrites
};

thread_local PreparedLimitsJson t_limits_json;

}  // namespace

const PreparedLimitJson& preparedLimitJson(const LimitStatus& limit) {
  PreparedLimitsJson& cache = t_limits_json;
  for (const PreparedLimitJson& p : cache.entries) {
    if (p.limit == limit.limit && p.unit == limit.unit &&
        p.unit_multiplier == limit.unit_multiplier && p.window_us == limit.window_us &&
        p.algorithm == limit.algorithm && p.name == limit.name) {
      return p;
    }
  }
  PreparedLimitJson& p = cache.entries[cache.next];
  cache.next = (cache.next + 1) % PreparedLimitsJson::kEntries;
  p.name.assign(limit.name);
  p.limit = limit.limit;
  p.unit = limit.unit;
  p.unit_multiplier = limit.unit_multiplier;
  p.window_us = limit.window_us;
  p.algorithm = limit.algorithm;
  p.name_json.clear();
  {
    JsonWriter w(p.name_json);
    w.value(limit.name);
  }
  // Written by the same writer as a whole object, whose braces then become the leading
  // comma and nothing: the same bytes as writing the fields in place.
  p.middle.clear();
  {
    JsonWriter w(p.middle);
    w.beginObject();
    w.field("limit", limit.limit);
    w.field("unit", unitName(limit.unit));
    w.field("unit_multiplier", limit.unit_multiplier);
    w.field("window_s", ceilSeconds(limit.window_us));
    w.field("algorithm", algorithmName(limit.algorithm));
    w.endObject();
  }
  p.middle.front() = ',';
  p.middle.pop_back();
  return p;
}

namespace {

/// Eight bytes (lowest first) that JsonWriter::string() copies as they are: printable ASCII
/// (and DEL) but '"' and '\\'. A byte under 0x20 borrows in the subtraction (a borrow only
/// runs on from a byte that fails already), one from 0x80 up has its high bit, and a byte
/// equal to '"' or '\\' is a zero byte of the XOR.
[[gnu::always_inline]] inline bool plainWord(std::uint64_t word) {
  constexpr std::uint64_t kOnes = words::kOnes;
  const auto zeroByte = [](std::uint64_t x) { return (x - kOnes) & ~x; };
  return (((word - kOnes * 0x20) | word | zeroByte(word ^ (kOnes * '"')) |
           zeroByte(word ^ (kOnes * '\\'))) &
          words::kHighs) == 0;
}

/// The bytes of `text` are all plainWord()'s: eight at a time, the last eight overlapping
/// the word before; a shorter text in two overlapping halves, padded with a plain byte.
[[gnu::always_inline]] inline bool plainText(std::string_view text) {
  const char* p = text.data();
  const std::size_t n = text.size();
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (!plainWord(words::load(p + i))) {
        return false;
      }
    }
    return plainWord(words::load(p + n - 8));
  }
  std::uint64_t word = words::kOnes * 'a';
  if (n >= 4) {
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    std::memcpy(&first, p, 4);
    std::memcpy(&last, p + n - 4, 4);
    word = first | static_cast<std::uint64_t>(last) << 32;
  } else if (n >= 2) {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    std::memcpy(&first, p, 2);
    std::memcpy(&last, p + n - 2, 2);
    word = (word & ~std::uint64_t{0xffffffff}) | first | static_cast<std::uint64_t>(last) << 16;
  } else if (n == 1) {
    word = (word & ~std::uint64_t{0xff}) | static_cast<unsigned char>(p[0]);
  }
  return plainWord(word);
}

/// What the general writer writes beyond the usual fields: none of it here.
bool usualDecision(const DecisionRequest& request, const Decision& decision) {
  if (decision.degraded || !decision.domain_known || !decision.lease_id.empty() ||
      !plainText(request.domain) || !plainText(request.client_id)) {
    return false;
  }
  for (const DescriptorStatus& d : decision.descriptors) {
    if (!d.metadata_json.empty()) {
      return false;
    }
    for (const LimitStatus& l : d.limits) {
      if (l.unlimited || l.override_value || l.algorithm == Algorithm::kLeakyBucket ||
          l.algorithm == Algorithm::kSketch || l.outcome.never || l.outcome.banned) {
        return false;
      }
    }
  }
  return true;
}

using words::Cursor;

thread_local std::string t_scratch;

// The longest unit or algorithm name (rules.hpp, limiter.hpp), with margin.
constexpr std::size_t kMaxNameBytes = 32;
// The bytes of the fixed parts, as an upper bound on the room the body needs.
constexpr std::size_t kHeadRoom =
    sizeof R"({"allowed":false,"domain":"","clientId":"","descriptors":[]})" + 1;
constexpr std::size_t kDescriptorRoom = sizeof R"({"matched":false,"limits":[]},)";
// A limit's, but for its name: the prepared middle (its fixed text, three numbers, the unit's
// and the algorithm's names) and the quotes around the name.
constexpr std::size_t kLimitRoom =
    sizeof R"({"name":"","allowed":false,"remaining":,"reset_after_ms":,"retry_after_ms":,"shadow":false},)" +
    sizeof R"(,"limit":,"unit":"","unit_multiplier":,"window_s":,"algorithm":"")" +
    6 * words::kMaxDecimalBytes + 2 * kMaxNameBytes;
// What one byte of a name can become in JSON: \u00XX.
constexpr std::size_t kMaxEscapedBytes = 6;

}  // namespace

bool writeUsualDecisionBody(std::string& body, const DecisionRequest& request,
                            const Decision& decision) {
  if (!usualDecision(request, decision)) {
    return false;
  }
  std::size_t room = kHeadRoom + request.domain.size() + request.client_id.size();
  for (const DescriptorStatus& d : decision.descriptors) {
    room += kDescriptorRoom;
    for (const LimitStatus& l : d.limits) {
      room += kLimitRoom + kMaxEscapedBytes * l.name.size();
    }
  }
  // Written in this thread's scratch, which every answer reuses (in the cache; the room is
  // a bound well above the answer's size), then appended.
  std::string& scratch = t_scratch;
  if (scratch.size() < room) {
    scratch.resize(room);
  }
  Cursor out(scratch.data());
  out.literal(R"({"allowed":)");
  out.flag(decision.allowed);
  out.literal(R"(,"domain":)");
  out.quoted(request.domain);
  if (!request.client_id.empty()) {
    out.literal(R"(,"clientId":)");
    out.quoted(request.client_id);
  }
  out.literal(R"(,"descriptors":[)");
  bool first_descriptor = true;
  for (const DescriptorStatus& d : decision.descriptors) {
    if (!first_descriptor) {
      out.literal(",");
    }
    first_descriptor = false;
    out.literal(R"({"matched":)");
    out.flag(d.matched);
    out.literal(R"(,"limits":[)");
    bool first_limit = true;
    for (const LimitStatus& l : d.limits) {
      if (!first_limit) {
        out.literal(",");
      }
      first_limit = false;
      const PreparedLimitJson& prepared = preparedLimitJson(l);
      out.literal(R"({"name":)");
      out.text(prepared.name_json);
      out.literal(R"(,"allowed":)");
      out.flag(l.outcome.allowed);
      out.text(prepared.middle);
      out.literal(R"(,"remaining":)");
      out.number(l.outcome.remaining > 0 ? l.outcome.remaining : 0);
      out.literal(R"(,"reset_after_ms":)");
      out.number(ceilMillis(l.outcome.reset_after_us));
      out.literal(R"(,"retry_after_ms":)");
      out.number(ceilMillis(l.outcome.retry_after_us));
      out.literal(R"(,"shadow":)");
      out.flag(l.shadow);
      out.literal("}");
    }
    out.literal("]}");
  }
  out.literal("]}\n");
  body.append(scratch.data(), static_cast<std::size_t>(out.at() - scratch.data()));
  return true;
}

}  // namespace sluice::http
