#include "grpc/rls_mapping.hpp"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "grpc/proto_wire.hpp"
#include "sluice/common/varint.hpp"
#include "sluice/decision/envoy_response.hpp"
#include "sluice/decision/rate_limit_headers.hpp"
#include "sluice/decision/request_shape.hpp"

namespace sluice::grpc {
namespace {

using Unit = rls::RateLimitResponse::RateLimit::Unit;

Error invalid(std::string field, std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument, std::move(field) + ": " + std::string(what));
}

std::uint32_t clampUint32(std::int64_t value) {
  return static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(value, 0, std::numeric_limits<std::uint32_t>::max()));
}

Unit unitOf(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return rls::RateLimitResponse::RateLimit::SECOND;
    case TimeUnit::kMinute:
      return rls::RateLimitResponse::RateLimit::MINUTE;
    case TimeUnit::kHour:
      return rls::RateLimitResponse::RateLimit::HOUR;
    case TimeUnit::kDay:
      return rls::RateLimitResponse::RateLimit::DAY;
    case TimeUnit::kWeek:
      return rls::RateLimitResponse::RateLimit::WEEK;
    case TimeUnit::kMonth:
      return rls::RateLimitResponse::RateLimit::MONTH;
    case TimeUnit::kYear:
      return rls::RateLimitResponse::RateLimit::YEAR;
  }
  return rls::RateLimitResponse::RateLimit::UNKNOWN;
}

/// The rate-limit headers of a decision (none without a binding limit), in the thread's
/// buffers (rateLimitHeaderFields()).
std::span<const HeaderField> headerFieldsOf(const Decision& decision) {
  if (const LimitStatus* binding = decision.binding()) {
    return rateLimitHeaderFields(*binding, !decision.allowed);
  }
  return {};
}

// Protobuf's wire format as its serializer writes these messages: fields in number order, a
// proto3 scalar or string only when not zero or empty, a message field whenever it is set.
// Each message's size is worked out first, so that it is written in one pass.
constexpr char kVarint = 0;
constexpr char kDelimited = 2;

constexpr char key(int field, char wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

/// A scalar field's size (0 when zero: not written).
std::size_t scalarSize(std::uint64_t value) { return value == 0 ? 0 : 1 + varintSize(value); }

/// A length-delimited field's size, given its content's.
std::size_t delimitedSize(std::size_t content) { return 1 + varintSize(content) + content; }

char* putScalar(char* p, char field_key, std::uint64_t value) {
  if (value == 0) {
    return p;
  }
  *p++ = field_key;
  return writeVarint(p, value);
}

char* putDelimited(char* p, char field_key, std::size_t content) {
  *p++ = field_key;
  return writeVarint(p, content);
}

char* putBytes(char* p, std::string_view bytes) {
  std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

/// The most one DescriptorStatus takes beside its limit's name: keys, lengths and scalars.
constexpr std::size_t kStatusBytes = 64;
/// The most a HeaderValue takes beside its key and value.
constexpr std::size_t kHeaderBytes = 3 * 11;

/// One DescriptorStatus (field 2 of the response), as toResponse() fills it.
char* putStatus(char* p, const DescriptorStatus& d) {
  const LimitStatus* binding = descriptorBindingLimit(d);
  if (binding == nullptr) {
    std::uint64_t remaining = 0;
    if (std::any_of(d.limits.begin(), d.limits.end(),
                    [](const LimitStatus& l) { return l.unlimited; })) {
      remaining = static_cast<std::uint32_t>(kEnvoyUnlimitedRemaining);
    }
    p = putDelimited(p, key(2, kDelimited),
                     scalarSize(rls::RateLimitResponse::OK) + scalarSize(remaining));
    p = putScalar(p, key(1, kVarint), rls::RateLimitResponse::OK);
    return putScalar(p, key(3, kVarint), remaining);
  }
  const bool over = !binding->shadow && !binding->outcome.allowed;
  const std::uint64_t code = over ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK;
  // RateLimit: requests_per_unit = 1, unit = 2, name = 3.
  const std::uint64_t per_unit = clampUint32(binding->limit);
  const auto unit = static_cast<std::uint64_t>(envoyUnit(*binding));
  const std::string_view name = binding->explicit_name ? binding->name : std::string_view();
  const std::size_t limit_size =
      scalarSize(per_unit) + scalarSize(unit) + (name.empty() ? 0 : delimitedSize(name.size()));
  const std::uint64_t remaining = clampUint32(binding->outcome.remaining);
  // Duration: seconds = 1 (int64: a negative one as its 64-bit two's complement).
  const auto seconds = static_cast<std::uint64_t>(ceilSeconds(binding->outcome.reset_after_us));
  const std::size_t reset_size = scalarSize(seconds);
  const std::size_t status_size = scalarSize(code) + delimitedSize(limit_size) +
                                  scalarSize(remaining) + delimitedSize(reset_size);
  p = putDelimited(p, key(2, kDelimited), status_size);
  p = putScalar(p, key(1, kVarint), code);
  p = putDelimited(p, key(2, kDelimited), limit_size);
  p = putScalar(p, key(1, kVarint), per_unit);
  p = putScalar(p, key(2, kVarint), unit);
  if (!name.empty()) {
    p = putDelimited(p, key(3, kDelimited), name.size());
    p = putBytes(p, name);
  }
  p = putScalar(p, key(3, kVarint), remaining);
  p = putDelimited(p, key(4, kDelimited), reset_size);
  return putScalar(p, key(1, kVarint), seconds);
}

/// One HeaderValue (field 3 of the response): key = 1, value = 2.
char* putHeader(char* p, std::string_view name, std::string_view value) {
  const std::size_t size = (name.empty() ? 0 : delimitedSize(name.size())) +
                           (value.empty() ? 0 : delimitedSize(value.size()));
  p = putDelimited(p, key(3, kDelimited), size);
  if (!name.empty()) {
    p = putDelimited(p, key(1, kDelimited), name.size());
    p = putBytes(p, name);
  }
  if (!value.empty()) {
    p = putDelimited(p, key(2, kDelimited), value.size());
    p = putBytes(p, value);
  }
  return p;
}

/// A RateLimitOverride's unit (envoy.type.v3.RateLimitUnit); nullopt for UNKNOWN.
std::optional<TimeUnit> timeUnitOf(::envoy::type::v3::RateLimitUnit unit) {
  switch (unit) {
    case ::envoy::type::v3::SECOND:
      return TimeUnit::kSecond;
    case ::envoy::type::v3::MINUTE:
      return TimeUnit::kMinute;
    case ::envoy::type::v3::HOUR:
      return TimeUnit::kHour;
    case ::envoy::type::v3::DAY:
      return TimeUnit::kDay;
    case ::envoy::type::v3::WEEK:
      return TimeUnit::kWeek;
    case ::envoy::type::v3::MONTH:
      return TimeUnit::kMonth;
    case ::envoy::type::v3::YEAR:
      return TimeUnit::kYear;
    default:
      return std::nullopt;
  }
}

}  // namespace

Result<DecisionRequest> toDecisionRequest(const rls::RateLimitRequest& request,
                                          const RequestBounds& bounds) {
  // The count first, so that a message with more descriptors than the bounds is not copied.
  if (static_cast<std::size_t>(request.descriptors_size()) > bounds.max_descriptors) {
    return invalid("descriptors",
                   "must have at most " + std::to_string(bounds.max_descriptors) + " descriptors");
  }
  // This thread's spare (decision.hpp, takeSpareRequest()): its descriptors, entries and
  // strings are refilled in place, so that a warm thread parses without allocating.
  DecisionRequest out = takeSpareRequest();
  if (Status filled = fillDecisionRequest(request, out, bounds); !filled) {
    return filled.error();
  }
  return out;
}

Status fillDecisionRequest(const rls::RateLimitRequest& request, DecisionRequest& out,
                           const RequestBounds& bounds) {
  if (static_cast<std::size_t>(request.descriptors_size()) > bounds.max_descriptors) {
    return invalid("descriptors",
                   "must have at most " + std::to_string(bounds.max_descriptors) + " descriptors");
  }
  out.envoy_api = true;
  out.domain.assign(request.domain());
  out.hits = std::max<std::int64_t>(1, request.hits_addend());
  out.descriptors.resize(static_cast<std::size_t>(request.descriptors_size()));
  bool any_descriptor_hits = false;
  bool any_descriptor_limits = false;
  for (int d = 0; d < request.descriptors_size(); ++d) {
    const auto& descriptor = request.descriptors(d);
    Descriptor& entries = out.descriptors[static_cast<std::size_t>(d)];
    entries.resize(static_cast<std::size_t>(descriptor.entries_size()));
    for (int e = 0; e < descriptor.entries_size(); ++e) {
      entries[static_cast<std::size_t>(e)].key.assign(descriptor.entries(e).key());
      entries[static_cast<std::size_t>(e)].value.assign(descriptor.entries(e).value());
    }
    if (descriptor.has_hits_addend()) {
      // Above the bounds (or int64) it stays out of range, so checkDecisionRequest() names it.
      std::uint64_t hits = std::min<std::uint64_t>(descriptor.hits_addend().value(),
                                                   static_cast<std::uint64_t>(bounds.max_hits) + 1);
      out.descriptor_hits.resize(d + 1);
      out.descriptor_hits[d] = static_cast<std::int64_t>(hits);
      any_descriptor_hits = true;
    }
    if (descriptor.is_negative_hits()) {
      // A refund of this descriptor's hits (Envoy 1.38's is_negative_hits).
      out.descriptor_refunds.resize(out.descriptors.size());
      out.descriptor_refunds[d] = true;
    }
    if (descriptor.has_limit()) {
      // envoy's RateLimitOverride: this descriptor is limited by the request, not the rules.
      auto unit = timeUnitOf(descriptor.limit().unit());
      if (!unit) {
        return invalid("descriptors[" + std::to_string(d) + "].limit.unit",
                       "must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR");
      }
      out.descriptor_limits.resize(d + 1);
      out.descriptor_limits[d] =
          LimitOverride{static_cast<std::int64_t>(descriptor.limit().requests_per_unit()), *unit};
      any_descriptor_limits = true;
    }
  }
  if (any_descriptor_hits) {
    out.descriptor_hits.resize(out.descriptors.size());
  }
  if (any_descriptor_limits) {
    out.descriptor_limits.resize(out.descriptors.size());
  }
  if (!out.descriptor_refunds.empty()) {
    out.descriptor_refunds.resize(out.descriptors.size());
  }
  return checkDecisionRequest(out, RequestApi::kEnvoy, bounds);
}

namespace {

// Field numbers of the usual request's messages, each length-delimited but hits_addend.
constexpr std::uint32_t kDomainField = 1;      // RateLimitRequest.domain
constexpr std::uint32_t kDescriptorField = 2;  // RateLimitRequest.descriptors
constexpr std::uint32_t kHitsField = 3;        // RateLimitRequest.hits_addend (varint)
constexpr std::uint32_t kEntryField = 1;       // RateLimitDescriptor.entries
constexpr std::uint32_t kEntryKeyField = 1;    // Entry.key
constexpr std::uint32_t kEntryValueField = 2;  // Entry.value

/// ASCII is valid UTF-8, which protobuf requires of a proto3 string; any other byte is left
/// to protobuf's own check. Eight bytes at a time.
bool ascii(std::string_view text) {
  std::uint64_t any = 0;
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + i, 8);
    any |= word;
  }
  for (; i < text.size(); ++i) {
    any |= static_cast<unsigned char>(text[i]);
  }
  return (any & 0x8080808080808080ULL) == 0;
}

/// One RateLimitDescriptor of key/value entries only, into `entries`.
bool readUsualDescriptor(std::string_view data, Descriptor& entries) {
  std::size_t count = 0;
  wire::WireReader reader{data};
  std::uint32_t field = 0;
  std::string_view bytes;
  bool bad = false;
  while (reader.next(field, bytes, bad)) {
    if (field != kEntryField || reader.type != wire::kWireDelimited) {
      return false;
    }
    if (entries.size() <= count) {
      entries.resize(count + 1);
    }
    Entry& entry = entries[count++];
    entry.key.clear();
    entry.value.clear();
    wire::WireReader fields{bytes};
    std::string_view text;
    while (fields.next(field, text, bad)) {
      if ((field != kEntryKeyField && field != kEntryValueField) ||
          fields.type != wire::kWireDelimited || !ascii(text)) {
        return false;
      }
      (field == kEntryKeyField ? entry.key : entry.value).assign(text);
    }
    if (bad) {
      return false;
    }
  }
  entries.resize(count);
  return !bad;
}

/// A RateLimitRequest of the usual shape into `out`; `descriptors` counts them. False:
/// another shape, for protobuf's parser (`out` then holds part of it).
bool readUsualFields(std::string_view message, DecisionRequest& out, std::size_t& descriptors) {
  descriptors = 0;
  wire::WireReader reader{message};
  std::uint32_t field = 0;
  std::string_view bytes;
  bool bad = false;
  while (reader.next(field, bytes, bad)) {
    if (field == kDomainField && reader.type == wire::kWireDelimited) {
      if (!ascii(bytes)) {
        return false;
      }
      out.domain.assign(bytes);
    } else if (field == kDescriptorField && reader.type == wire::kWireDelimited) {
      if (out.descriptors.size() <= descriptors) {
        out.descriptors.resize(descriptors + 1);
      }
      if (!readUsualDescriptor(bytes, out.descriptors[descriptors++])) {
        return false;
      }
    } else if (field == kHitsField && reader.type == wire::kWireVarint &&
               reader.value <= std::numeric_limits<std::uint32_t>::max()) {
      out.hits = std::max<std::int64_t>(1, static_cast<std::int64_t>(reader.value));
    } else {
      return false;
    }
  }
  return !bad;
}

}  // namespace

std::optional<Status> readUsualRequestInto(std::string_view message, DecisionRequest& out,
                                           const RequestBounds& bounds) {
  std::size_t descriptors = 0;
  if (!readUsualFields(message, out, descriptors) || descriptors > bounds.max_descriptors) {
    return std::nullopt;
  }
  out.envoy_api = true;
  out.descriptors.resize(descriptors);
  return checkDecisionRequest(out, RequestApi::kEnvoy, bounds);
}

std::optional<Result<DecisionRequest>> readUsualRequest(std::string_view message,
                                                        const RequestBounds& bounds) {
  DecisionRequest out = takeSpareRequest();
  std::optional<Status> read = readUsualRequestInto(message, out, bounds);
  if (!read) {
    // Another shape: the spare goes back for protobuf's path to take.
    Decision spent;
    spent.request = std::move(out);
    recycleDecision(std::move(spent));
    return std::nullopt;
  }
  if (!*read) {
    return std::optional<Result<DecisionRequest>>(std::in_place, read->error());
  }
  return std::optional<Result<DecisionRequest>>(std::in_place, std::move(out));
}

Unit envoyUnit(const LimitStatus& limit) {
  if (limit.unit_multiplier == 1) {
    return unitOf(limit.unit);
  }
  const Micros window = unitMicros(limit.unit) * limit.unit_multiplier;
  for (TimeUnit unit : {TimeUnit::kSecond, TimeUnit::kMinute, TimeUnit::kHour, TimeUnit::kDay,
                        TimeUnit::kWeek, TimeUnit::kMonth, TimeUnit::kYear}) {
    if (unitMicros(unit) == window) {
      return unitOf(unit);
    }
  }
  return rls::RateLimitResponse::RateLimit::UNKNOWN;
}

void toResponse(const Decision& decision, bool headers, rls::RateLimitResponse& response) {
  response.set_overall_code(decision.allowed ? rls::RateLimitResponse::OK
                                             : rls::RateLimitResponse::OVER_LIMIT);
  for (const DescriptorStatus& d : decision.descriptors) {
    auto* status = response.add_statuses();
    const LimitStatus* binding = descriptorBindingLimit(d);
    if (binding == nullptr) {
      status->set_code(rls::RateLimitResponse::OK);
      bool unlimited = std::any_of(d.limits.begin(), d.limits.end(),
                                   [](const LimitStatus& l) { return l.unlimited; });
      if (unlimited) {
        status->set_limit_remaining(static_cast<std::uint32_t>(kEnvoyUnlimitedRemaining));
      }
      continue;
    }
    bool over = !binding->shadow && !binding->outcome.allowed;
    status->set_code(over ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK);
    auto* limit = status->mutable_current_limit();
    if (binding->explicit_name) {
      limit->set_name(binding->name);
    }
    limit->set_requests_per_unit(clampUint32(binding->limit));
    limit->set_unit(envoyUnit(*binding));
    status->set_limit_remaining(clampUint32(binding->outcome.remaining));
    status->mutable_duration_until_reset()->set_seconds(
        ceilSeconds(binding->outcome.reset_after_us));
  }
  if (std::string json = envoyDynamicMetadataJson(decision); !json.empty()) {
    // Built by the same code as /json's dynamicMetadata, so both APIs answer alike.
    if (!::google::protobuf::util::JsonStringToMessage(json, response.mutable_dynamic_metadata())
             .ok()) {
      response.clear_dynamic_metadata();
    }
  }
  if (headers) {
    for (const HeaderField& field : headerFieldsOf(decision)) {
      // Assigned in place: a cleared response keeps its HeaderValues and their strings.
      auto* header = response.add_response_headers_to_add();
      header->mutable_key()->assign(field.name.data(), field.name.size());
      header->mutable_value()->assign(field.value.data(), field.value.size());
    }
  }
}

bool encodeResponse(const Decision& decision, bool headers, std::string& framed) {
  if (hasEnvoyDynamicMetadata(decision)) {
    return false;  // a google.protobuf.Struct: toResponse() builds it from the JSON
  }
  // Written in the thread's scratch buffer, with room for the most it can take (grown, never
  // zeroed again), then copied out as what it took.
  std::span<const HeaderField> fields;
  if (headers) {
    fields = headerFieldsOf(decision);
  }
  constexpr std::size_t kPrefix = wire::kFrameHeaderBytes;
  std::size_t room = kPrefix + 2;
  for (const HeaderField& field : fields) {
    room += kHeaderBytes + field.name.size() + field.value.size();
  }
  for (const DescriptorStatus& d : decision.descriptors) {
    const LimitStatus* binding = descriptorBindingLimit(d);
    room += kStatusBytes + (binding != nullptr ? binding->name.size() : 0);
  }
  thread_local std::string scratch;
  if (scratch.size() < room) {
    scratch.resize(room);
  }
  char* const begin = scratch.data();
  char* p = begin + kPrefix;
  p = putScalar(p, key(1, kVarint),
                decision.allowed ? rls::RateLimitResponse::OK : rls::RateLimitResponse::OVER_LIMIT);
  for (const DescriptorStatus& d : decision.descriptors) {
    p = putStatus(p, d);
  }
  for (const HeaderField& field : fields) {
    p = putHeader(p, field.name, field.value);
  }
  wire::writeFrameHeader(begin, static_cast<std::size_t>(p - begin) - kPrefix);
  framed.assign(begin, static_cast<std::size_t>(p - begin));
  return true;
}

}  // namespace sluice::grpc
