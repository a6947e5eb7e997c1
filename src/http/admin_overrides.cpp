#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "http/admin_routes.hpp"
#include "http/request_attributes.hpp"

namespace sluice::http {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

Result<OverrideRequest> bad(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

/// One descriptor, in either shape the decision endpoints take: {"entries": [...]} or a bare
/// list of {"key", "value"}.
Result<Descriptor> parseDescriptor(const json& value, const std::string& path) {
  const json* entries = &value;
  if (value.is_object()) {
    if (!value.contains("entries")) {
      return makeError(ErrorKind::kInvalidArgument, path + ": must be {\"entries\": [...]}");
    }
    entries = &value["entries"];
  }
  if (!entries->is_array() || entries->empty()) {
    return makeError(ErrorKind::kInvalidArgument,
                     path + ": must be a non-empty list of {\"key\", \"value\"}");
  }
  Descriptor out;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const json& entry = (*entries)[i];
    const std::string where = path + "[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("key") || !entry["key"].is_string() ||
        entry["key"].get<std::string>().empty() ||
        (entry.contains("value") && !entry["value"].is_string())) {
      return makeError(ErrorKind::kInvalidArgument,
                       where + ": must be {\"key\": non-empty string, \"value\": string}");
    }
    out.push_back(Entry{entry["key"].get<std::string>(), entry.value("value", "")});
  }
  return out;
}

std::optional<std::string> stringField(const json& body, const char* name, std::string& error) {
  if (!body.contains(name)) {
    return std::nullopt;
  }
  if (!body[name].is_string()) {
    error = std::string(name) + ": must be a string";
    return std::nullopt;
  }
  return body[name].get<std::string>();
}

/// The body of PUT and DELETE /limits/overrides; `put` asks for rate_limit and reason.
Result<OverrideRequest> parseOverrideBody(const std::string& body, bool put,
                                          const std::string& default_domain) {
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception&) {
    return bad("body: must be a JSON object");
  }
  if (!doc.is_object()) {
    return bad("body: must be a JSON object");
  }
  static const std::set<std::string, std::less<>> kPut = {
      "domain", "rule", "descriptors", "clientId", "rate_limit", "expires", "reason"};
  static const std::set<std::string, std::less<>> kDelete = {"domain", "rule", "descriptors",
                                                             "clientId", "reason"};
  for (const auto& [key, value] : doc.items()) {
    if ((put ? kPut : kDelete).count(key) == 0) {
      return bad("unknown field \"" + key + "\"");
    }
  }
  OverrideRequest request;
  std::string error;
  request.domain = stringField(doc, "domain", error).value_or(default_domain);
  request.rule = stringField(doc, "rule", error).value_or("");
  request.client_id = stringField(doc, "clientId", error).value_or("");
  request.reason = stringField(doc, "reason", error).value_or("");
  request.expires = stringField(doc, "expires", error);
  if (!error.empty()) {
    return bad(error);
  }
  if (request.domain.empty()) {
    return bad("domain: required");
  }
  if (doc.contains("descriptors")) {
    const json& descriptors = doc["descriptors"];
    if (!descriptors.is_array() || descriptors.size() != 1) {
      return bad("descriptors: must hold exactly one descriptor (the bucket to override)");
    }
    auto descriptor = parseDescriptor(descriptors[0], "descriptors[0]");
    if (!descriptor) {
      return descriptor.error();
    }
    request.descriptor = std::move(*descriptor);
  }
  if (put) {
    if (!doc.contains("rate_limit")) {
      return bad("rate_limit: required ({\"unit\": \"minute\", \"requests_per_unit\": 1000})");
    }
    request.rate_limit_json = doc["rate_limit"].dump();
  }
  return request;
}

int statusOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kUnavailable:
    case ErrorKind::kConnection:
    case ErrorKind::kTimeout:
      return 503;
    case ErrorKind::kInvalidArgument:
      return 400;
    default:
      return 500;
  }
}

std::string targetText(const OverrideRequest& request) {
  std::string text = "domain " + request.domain;
  if (!request.rule.empty()) {
    text += " rule \"" + request.rule + "\"";
  }
  if (request.descriptor) {
    text += " descriptor " + describeDescriptor(*request.descriptor);
  }
  return text + " client \"" + request.client_id + "\"";
}

ordered_json recordOf(const StoredOverride& value) {
  return ordered_json::parse(value.record_json, nullptr, false);
}

void putOverride(const AdminContext& context, const Request& request, Respond respond) {
  auto parsed = parseOverrideBody(request.body, true, context.operations.default_domain);
  if (!parsed) {
    respond(jsonError(400, parsed.error().message));
    return;
  }
  parsed->set_by = request.peer;
  Respond answer = answeredOn(context.answer_on, std::move(respond));
  const std::string target = targetText(*parsed);
  Status started =
      context.overrides->set(*parsed, [answer, target, peer = request.peer,
                                       reason = parsed->reason](Result<OverrideChange> change) {
        if (!change) {
          spdlog::warn("admin: override of {} from {} failed: {}", target, peer,
                       change.error().message);
          answer(jsonError(statusOf(change.error()), change.error().message));
          return;
        }
        // The audit trail: who changed what, and why.
        spdlog::info("admin: override {} {} by {} (reason: {}): {}",
                     change->replaced ? "replaced for" : "set for", target, peer, reason,
                     change->value->record_json);
        answer(jsonResponse(
            200, {{"replaced", change->replaced}, {"override", recordOf(*change->value)}}));
      });
  if (!started) {
    spdlog::info("admin: override of {} from {} refused: {}", target, request.peer,
                 started.error().message);
    answer(jsonError(statusOf(started.error()), started.error().message));
  }
}

void deleteOverride(const AdminContext& context, const Request& request, Respond respond) {
  auto parsed = parseOverrideBody(request.body, false, context.operations.default_domain);
  if (!parsed) {
    respond(jsonError(400, parsed.error().message));
    return;
  }
  Respond answer = answeredOn(context.answer_on, std::move(respond));
  const std::string target = targetText(*parsed);
  Status started = context.overrides->remove(
      *parsed,
      [answer, target, peer = request.peer, reason = parsed->reason](Result<bool> removed) {
        if (!removed) {
          answer(jsonError(statusOf(removed.error()), removed.error().message));
          return;
        }
        if (!*removed) {
          answer(jsonError(404, "no override is set for " + target));
          return;
        }
        spdlog::info("admin: override deleted for {} by {} (reason: {})", target, peer,
                     reason.empty() ? "none given" : reason);
        answer(jsonResponse(200, {{"deleted", true}}));
      });
  if (!started) {
    answer(jsonError(statusOf(started.error()), started.error().message));
  }
}

void listOverrides(const AdminContext& context, const Request& request, Respond respond) {
  const std::size_t mark = request.target.find('?');
  const std::string_view query = mark == std::string::npos
                                     ? std::string_view()
                                     : std::string_view(request.target).substr(mark + 1);
  std::string_view rest = query;
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const std::string_view name = pair.substr(0, pair.find('='));
    if (!pair.empty() && name != "domain" && name != "client" && name != "rule") {
      respond(jsonError(400, "query: unknown parameter \"" + std::string(name) +
                                 "\" (expected domain, client, rule)"));
      return;
    }
  }
  OverrideFilter filter{queryValue(query, "domain").value_or(""),
                        queryValue(query, "client").value_or(""),
                        queryValue(query, "rule").value_or("")};
  Respond answer = answeredOn(context.answer_on, std::move(respond));
  context.overrides->list(filter, [answer](Result<std::vector<StoredOverridePtr>> listed) {
    if (!listed) {
      answer(jsonError(statusOf(listed.error()), listed.error().message));
      return;
    }
    ordered_json items = ordered_json::array();
    for (const StoredOverridePtr& value : *listed) {
      items.push_back(recordOf(*value));
    }
    answer(jsonResponse(200, {{"overrides", std::move(items)}}));
  });
}

}  // namespace

void addOverrideRoutes(Router& router, const AdminContext& context) {
  router.add("PUT", "/limits/overrides", [context](const Request& request, Respond respond) {
    putOverride(context, request, std::move(respond));
  });
  router.add("GET", "/limits/overrides", [context](const Request& request, Respond respond) {
    listOverrides(context, request, std::move(respond));
  });
  router.add("DELETE", "/limits/overrides", [context](const Request& request, Respond respond) {
    deleteOverride(context, request, std::move(respond));
  });
}

}  // namespace sluice::http
