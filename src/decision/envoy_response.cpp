#include "sluice/decision/envoy_response.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "sluice/decision/lease_id.hpp"

namespace sluice {

std::string_view envoyUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return "SECOND";
    case TimeUnit::kMinute:
      return "MINUTE";
    case TimeUnit::kHour:
      return "HOUR";
    case TimeUnit::kDay:
      return "DAY";
    case TimeUnit::kWeek:
      return "WEEK";
    case TimeUnit::kMonth:
      return "MONTH";
    case TimeUnit::kYear:
      return "YEAR";
  }
  return "UNKNOWN";
}

void writeRulesMetadata(JsonWriter& w, const std::string& text) {
  if (nlohmann::json::accept(text)) {
    w.raw(text);
  } else {
    w.value(text);
  }
}

bool hasEnvoyDynamicMetadata(const Decision& decision) {
  return !decision.lease_id.empty() ||
         std::any_of(decision.descriptors.begin(), decision.descriptors.end(),
                     [](const DescriptorStatus& d) { return !d.metadata_json.empty(); });
}

void writeEnvoyDynamicMetadata(JsonWriter& w, const Decision& decision) {
  const DecisionRequest& request = decision.request;
  w.beginObject();
  w.field("domain", request.domain);
  w.key("descriptors");
  w.beginArray();
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    w.beginObject();
    w.key("entries");
    w.beginArray();
    for (const Entry& e : request.descriptors[i]) {
      w.value(e.key + "=" + e.value);
    }
    w.endArray();
    if (i < request.descriptor_limits.size() && request.descriptor_limits[i]) {
      const LimitOverride& limit = *request.descriptor_limits[i];
      w.field("limit", "requests_per_unit:" + std::to_string(limit.requests_per_unit) +
                           " unit:" + std::string(envoyUnitName(limit.unit)));
    }
    if (i < request.descriptor_hits.size() && request.descriptor_hits[i]) {
      w.field("hitsAddend", *request.descriptor_hits[i]);
    }
    w.endObject();
  }
  w.endArray();
  if (request.hits != 1) {
    w.field("hitsAddend", request.hits);
  }
  if (!decision.metadata_json.empty()) {
    w.key("metadata");
    writeRulesMetadata(w, decision.metadata_json);
  }
  if (!decision.lease_id.empty()) {
    // What Envoy's `metadata` action reads back into the refund at stream end (lease_id.hpp).
    w.field(kLeaseIdKey, decision.lease_id);
  }
  w.endObject();
}

std::string envoyDynamicMetadataJson(const Decision& decision) {
  if (!hasEnvoyDynamicMetadata(decision)) {
    return {};
  }
  std::string json;
  JsonWriter w(json);
  writeEnvoyDynamicMetadata(w, decision);
  w.finish();
  return json;
}

}  // namespace sluice
