#include "grpc/rls_mapping.hpp"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

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

/// "Name: value\r\n" lines (what the HTTP answers carry) as HeaderValues.
void addHeaderLines(std::string_view lines, rls::RateLimitResponse& response) {
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
    // Assigned in place: a cleared response keeps its HeaderValues and their strings.
    auto* header = response.add_response_headers_to_add();
    header->mutable_key()->assign(line.data(), colon);
    header->mutable_value()->assign(value.data(), value.size());
  }
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
    if (const LimitStatus* binding = decision.binding()) {
      // The lines' buffer is the thread's, kept from call to call.
      thread_local std::string lines;
      lines.clear();
      appendRateLimitHeaders(lines, *binding, !decision.allowed);
      addHeaderLines(lines, response);
    }
  }
}

}  // namespace sluice::grpc
