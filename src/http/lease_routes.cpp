#include "http/lease_routes.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "http/reservation_routes.hpp"

namespace sluice::http {
namespace {

/// The lease id of a `{"lease": "<id>"}` body; every other field is an error.
Result<std::string> parseLeaseBody(std::string_view body) {
  nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded()) {
    return makeError(ErrorKind::kInvalidArgument, "body: not valid JSON");
  }
  if (!json.is_object()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "body: must be a JSON object such as {\"lease\": \"<id>\"}");
  }
  for (const auto& [key, value] : json.items()) {
    if (key != "lease") {
      return makeError(ErrorKind::kInvalidArgument,
                       key + ": unknown field (expected only \"lease\")");
    }
  }
  const auto it = json.find("lease");
  if (it == json.end() || it->is_null()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "lease: required (the \"lease\".\"id\" of an admitting answer)");
  }
  if (!it->is_string()) {
    return makeError(ErrorKind::kInvalidArgument, "lease: must be a string");
  }
  return it->get<std::string>();
}

Response leaseErrorResponse(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return jsonError(400, error.message);
    case ErrorKind::kNotFound:
      return jsonError(404, error.message);
    default:
      return decisionErrorResponse(error);
  }
}

Response leaseResponse(const LeaseAnswer& answer) {
  nlohmann::ordered_json body;
  if (answer.op == LeaseOp::kRelease) {
    body["released"] = true;
  } else {
    body["renewed"] = true;
    body["expires_in_ms"] = answer.expires_in_us / kMicrosPerMilli;
  }
  nlohmann::ordered_json limits = nlohmann::ordered_json::array();
  for (const LeaseAnswer::Limit& limit : answer.limits) {
    limits.push_back({{"name", limit.name},
                      {"max_in_flight", limit.max_in_flight},
                      {"available", limit.available}});
  }
  body["limits"] = std::move(limits);
  return jsonResponse(200, body);
}

Handler leaseHandler(const HandlerContext& context, LeaseOp op) {
  return [context, op](const Request& request, Respond respond) {
    Result<std::string> id = parseLeaseBody(request.body);
    if (!id) {
      respond(jsonError(400, id.error().message));
      return;
    }
    if (context.leases == nullptr) {
      respond(jsonError(503, "leases: not served by this listener"));
      return;
    }
    context.leases->change(
        op, *id, [respond = std::move(respond)](Result<LeaseAnswer> answer) mutable {
          respond(answer ? leaseResponse(*answer) : leaseErrorResponse(answer.error()));
        });
  };
}

/// POST /release's body names a lease or a reservation: which one, or an error.
Result<bool> releasesLease(std::string_view body) {
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "body: must be a JSON object such as {\"lease\": \"<id>\"} or "
                     "{\"reservation_id\": \"<id>\", \"domain\": ..., \"descriptors\": ...}");
  }
  const bool lease = json.contains("lease");
  const bool reservation = json.contains("reservation_id");
  if (lease && reservation) {
    return makeError(ErrorKind::kInvalidArgument,
                     "body: both \"lease\" and \"reservation_id\": a release gives back one "
                     "lease or one reservation (send two requests)");
  }
  if (!lease && !reservation) {
    return makeError(ErrorKind::kInvalidArgument,
                     "body: neither \"lease\" (a concurrency limit's lease, from an admitting "
                     "answer) nor \"reservation_id\" (a reservation, from /reserve): one is "
                     "required");
  }
  return lease;
}

}  // namespace

void addLeaseRoutes(Router& router, const HandlerContext& context) {
  router.add("POST", "/release",
             [lease = leaseHandler(context, LeaseOp::kRelease),
              reservation = reservationHandler(context, HoldOp::kRelease)](const Request& request,
                                                                           Respond respond) {
               Result<bool> is_lease = releasesLease(request.body);
               if (!is_lease) {
                 respond(jsonError(400, is_lease.error().message));
                 return;
               }
               (*is_lease ? lease : reservation)(request, std::move(respond));
             });
  router.add("POST", "/renew", leaseHandler(context, LeaseOp::kRenew));
}

}  // namespace sluice::http
