#include "sluice/decision/request_shape.hpp"

#include <string>
#include <string_view>

namespace sluice {
namespace {

Error fieldError(std::string path, std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument, std::move(path) + ": " + std::string(what));
}

std::string atMostBytes(const RequestBounds& bounds) {
  return "must be at most " + std::to_string(bounds.max_string_bytes) + " bytes";
}

std::string hitsRange(const RequestBounds& bounds) {
  return "must be an integer from 0 to " + std::to_string(bounds.max_hits);
}

std::string descriptorPath(std::size_t index) {
  return "descriptors[" + std::to_string(index) + "]";
}

Status checkDescriptor(const Descriptor& descriptor, std::size_t index,
                       const RequestBounds& bounds) {
  if (descriptor.size() > bounds.max_entries) {
    return fieldError(descriptorPath(index) + ".entries",
                      "must have at most " + std::to_string(bounds.max_entries) + " entries");
  }
  for (std::size_t e = 0; e < descriptor.size(); ++e) {
    const Entry& entry = descriptor[e];
    if (entry.key.empty() || entry.key.size() > bounds.max_string_bytes ||
        entry.value.size() > bounds.max_string_bytes) {
      std::string path = descriptorPath(index) + ".entries[" + std::to_string(e) + "]";
      if (entry.key.empty()) {
        return fieldError(path + ".key", "must be a non-empty string");
      }
      if (entry.key.size() > bounds.max_string_bytes) {
        return fieldError(path + ".key", atMostBytes(bounds));
      }
      return fieldError(path + ".value", atMostBytes(bounds));
    }
  }
  return {};
}

}  // namespace

Status checkDecisionRequest(const DecisionRequest& request, RequestApi api,
                            const RequestBounds& bounds) {
  const bool envoy = api == RequestApi::kEnvoy;
  if (envoy && request.domain.empty()) {
    return fieldError("domain", "is required (a non-empty string)");
  }
  if (request.domain.size() > bounds.max_string_bytes) {
    return fieldError("domain", atMostBytes(bounds));
  }
  if (request.client_id.size() > bounds.max_string_bytes) {
    return fieldError("clientId", atMostBytes(bounds));
  }
  if (envoy && request.descriptors.empty()) {
    return fieldError("descriptors", "must be a non-empty array");
  }
  if (request.descriptors.size() > bounds.max_descriptors) {
    return fieldError("descriptors", "must have at most " + std::to_string(bounds.max_descriptors) +
                                         " descriptors");
  }
  for (std::size_t d = 0; d < request.descriptors.size(); ++d) {
    if (Status status = checkDescriptor(request.descriptors[d], d, bounds); !status) {
      return status;
    }
  }
  if (request.hits < 0 || request.hits > bounds.max_hits) {
    return fieldError(envoy ? "hits_addend" : "hits", hitsRange(bounds));
  }
  for (std::size_t d = 0; d < request.descriptor_hits.size(); ++d) {
    const auto& hits = request.descriptor_hits[d];
    if (hits && (*hits < 0 || *hits > bounds.max_hits)) {
      return fieldError(descriptorPath(d) + ".hits_addend", hitsRange(bounds));
    }
  }
  return {};
}

}  // namespace sluice
