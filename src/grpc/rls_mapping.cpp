#include "grpc/rls_mapping.hpp"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

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

/// Each "Name: value\r\n" line (what the HTTP answers carry) as fn(name, value).
template <typename Fn>
void forEachHeaderLine(std::string_view lines, Fn&& fn) {
  while (!lines.empty()) {
    std::size_t end = lines.find("\r\n");
    std::string_view line = lines.substr(0, end);
    lines = end == std::string_view::npos ? std::string_view() : lines.substr(end + 2);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') {
      value.remove_prefix(1);
    }
    fn(line.substr(0, colon), value);
  }
}

/// The lines as HeaderValues.
void addHeaderLines(std::string_view lines, rls::RateLimitResponse& response) {
  forEachHeaderLine(lines, [&response](std::string_view name, std::string_view value) {
    // Assigned in place: a cleared response keeps its HeaderValues and their strings.
    auto* header = response.add_response_headers_to_add();
    header->mutable_key()->assign(name.data(), name.size());
    header->mutable_value()->assign(value.data(), value.size());
  });
}

/// The rate-limit header lines of a decision (empty without a binding limit), in the
/// thread's buffer, kept from call to call.
const std::string& headerLinesOf(const Decision& decision) {
  thread_local std::string lines;
  lines.clear();
  if (const LimitStatus* binding = decision.binding()) {
    appendRateLimitHeaders(lines, *binding, !decision.allowed);
  }
  return lines;
}

// Protobuf's wire format as its serializer writes these messages: fields in number order, a
// proto3 scalar or string only when not zero or empty, a message field whenever it is set.
void putKey(std::string& out, std::uint32_t field, std::uint32_t wire_type) {
  putVarint(out, (field << 3) | wire_type);
}

void putVarintField(std::string& out, std::uint32_t field, std::uint64_t value) {
  if (value != 0) {
    putKey(out, field, 0);
    putVarint(out, value);
  }
}

void putStringField(std::string& out, std::uint32_t field, std::string_view value) {
  if (!value.empty()) {
    putKey(out, field, 2);
    putVarint(out, value.size());
    out.append(value);
  }
}

void putMessageField(std::string& out, std::uint32_t field, std::string_view body) {
  putKey(out, field, 2);
  putVarint(out, body.size());
  out.append(body);
}

/// One DescriptorStatus, as toResponse() fills it.
void encodeStatus(const DescriptorStatus& d, std::string& status) {
  // The nested messages' scratch buffers: the thread's, kept from call to call.
  thread_local std::string limit;
  thread_local std::string reset;
  status.clear();
  const LimitStatus* binding = descriptorBindingLimit(d);
  if (binding == nullptr) {
    putVarintField(status, 1, rls::RateLimitResponse::OK);
    if (std::any_of(d.limits.begin(), d.limits.end(),
                    [](const LimitStatus& l) { return l.unlimited; })) {
      putVarintField(status, 3, static_cast<std::uint32_t>(kEnvoyUnlimitedRemaining));
    }
    return;
  }
  const bool over = !binding->shadow && !binding->outcome.allowed;
  putVarintField(status, 1, over ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK);
  limit.clear();
  putVarintField(limit, 1, clampUint32(binding->limit));
  putVarintField(limit, 2, static_cast<std::uint64_t>(envoyUnit(*binding)));
  if (binding->explicit_name) {
    putStringField(limit, 3, binding->name);
  }
  putMessageField(status, 2, limit);
  putVarintField(status, 3, clampUint32(binding->outcome.remaining));
  reset.clear();
  putVarintField(reset, 1,
                 static_cast<std::uint64_t>(ceilSeconds(binding->outcome.reset_after_us)));
  putMessageField(status, 4, reset);
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
  if (Status shape = checkDecisionRequest(out, RequestApi::kEnvoy, bounds); !shape) {
    return shape.error();
  }
  return out;
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
    addHeaderLines(headerLinesOf(decision), response);
  }
}

bool encodeResponse(const Decision& decision, bool headers, std::string& framed) {
  if (hasEnvoyDynamicMetadata(decision)) {
    return false;  // a google.protobuf.Struct: toResponse() builds it from the JSON
  }
  constexpr std::size_t kPrefix = 5;
  framed.assign(kPrefix, '\0');
  putVarintField(
      framed, 1,
      decision.allowed ? rls::RateLimitResponse::OK : rls::RateLimitResponse::OVER_LIMIT);
  thread_local std::string status;
  for (const DescriptorStatus& d : decision.descriptors) {
    encodeStatus(d, status);
    putMessageField(framed, 2, status);
  }
  if (headers) {
    thread_local std::string header;
    forEachHeaderLine(headerLinesOf(decision),
                      [&framed](std::string_view name, std::string_view value) {
                        header.clear();
                        putStringField(header, 1, name);
                        putStringField(header, 2, value);
                        putMessageField(framed, 3, header);
                      });
  }
  const std::size_t size = framed.size() - kPrefix;
  framed[1] = static_cast<char>((size >> 24) & 0xff);
  framed[2] = static_cast<char>((size >> 16) & 0xff);
  framed[3] = static_cast<char>((size >> 8) & 0xff);
  framed[4] = static_cast<char>(size & 0xff);
  return true;
}

}  // namespace sluice::grpc
