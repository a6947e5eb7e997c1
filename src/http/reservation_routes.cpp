#include "http/reservation_routes.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "http/decision_codec.hpp"
#include "http/fast_decision_parser.hpp"
#include "sluice/decision/request_shape.hpp"

namespace sluice::http {
namespace {

using Json = nlohmann::json;

Error fieldError(std::string_view field, std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument, std::string(field) + ": " + std::string(what));
}

/// A whole number in [min, max] at `field`.
Result<std::int64_t> wholeNumber(const Json& value, std::string_view field, std::int64_t min,
                                 std::int64_t max) {
  const std::string bounds =
      "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (value.is_number_integer()) {
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(max)) {
        return fieldError(field, bounds + ", got " + value.dump());
      }
      if (static_cast<std::int64_t>(v) < min) {
        return fieldError(field, bounds + ", got " + value.dump());
      }
      return static_cast<std::int64_t>(v);
    }
    const auto v = value.get<std::int64_t>();
    if (v < min || v > max) {
      return fieldError(field, bounds + ", got " + value.dump());
    }
    return v;
  }
  return fieldError(field, bounds);
}

std::string_view endpointOf(HoldOp op) {
  switch (op) {
    case HoldOp::kReserve:
      return "/reserve";
    case HoldOp::kCommit:
      return "/commit";
    case HoldOp::kRelease:
      return "/release";
    case HoldOp::kNone:
      break;
  }
  return "";
}

/// Takes the step's own fields out of `json` into `step` and `hits`.
Status takeStepFields(Json& json, HoldOp op, ReservationRequest& step, std::int64_t& hits) {
  for (const char* refused : {"hits", "refund", "report"}) {
    if (json.contains(refused)) {
      return fieldError(refused, "is not a field of " + std::string(endpointOf(op)) +
                                     (op == HoldOp::kReserve  ? " (the amount is \"amount\")"
                                      : op == HoldOp::kCommit ? " (the amount is \"actual\")"
                                                              : ""));
    }
  }
  const auto take = [&json](const char* name) -> std::optional<Json> {
    auto it = json.find(name);
    if (it == json.end() || it->is_null()) {
      if (it != json.end()) {
        json.erase(it);
      }
      return std::nullopt;
    }
    Json value = std::move(*it);
    json.erase(it);
    return value;
  };
  step.op = op;
  if (op == HoldOp::kReserve) {
    auto amount = take("amount");
    if (!amount) {
      return fieldError("amount", "is required: the amount to hold, e.g. the estimated tokens");
    }
    auto value = wholeNumber(*amount, "amount", 1, kMaxHits);
    if (!value) {
      return value.error();
    }
    hits = *value;
    if (auto ttl = take("ttl_ms")) {
      auto ms = wholeNumber(*ttl, "ttl_ms", 1, std::int64_t{1} << 40);
      if (!ms) {
        return ms.error();
      }
      step.ttl_us = *ms * 1000;
    }
    return {};
  }
  auto id = take("reservation_id");
  if (!id || !id->is_string()) {
    return fieldError("reservation_id", "is required: the id /reserve answered, a string");
  }
  step.id = id->get<std::string>();
  hits = 0;
  if (op == HoldOp::kCommit) {
    auto actual = take("actual");
    if (!actual) {
      return fieldError("actual", "is required: the amount the work really cost");
    }
    auto value = wholeNumber(*actual, "actual", 0, kMaxHits);
    if (!value) {
      return value.error();
    }
    hits = *value;
  }
  return {};
}

/// `"status":"<word>"` for each status (holdStatusName()'s words, plain ASCII), ready to copy.
std::string_view statusField(HoldStatus status) {
  switch (status) {
    case HoldStatus::kReserved:
      return R"("status":"reserved")";
    case HoldStatus::kDenied:
      return R"("status":"denied")";
    case HoldStatus::kFull:
      return R"("status":"full")";
    case HoldStatus::kCommitted:
      return R"("status":"committed")";
    case HoldStatus::kLate:
      return R"("status":"late")";
    case HoldStatus::kReleased:
      return R"("status":"released")";
    case HoldStatus::kSettled:
      return R"("status":"settled")";
    case HoldStatus::kExpired:
      return R"("status":"expired")";
    case HoldStatus::kUnknown:
      return R"("status":"unknown")";
    case HoldStatus::kNone:
      break;
  }
  return R"("status":"")";
}

/// The fields of a reservation step's answer, first in its body. The usual steps' fixed
/// text is written as literals (the writer copies those in place).
void writeStepFields(JsonWriter& w, const Decision& decision) {
  const ReservationOutcome& step = decision.reservation;
  // First in the object: no separator before it. The id needs no escaping either
  // (reservation.hpp: r1.<digits>.<hex>.<hex>).
  switch (step.status) {
    case HoldStatus::kReserved:
      w.raw(R"("status":"reserved","reservation_id":")");
      w.text(step.id);
      w.text("\"");
      w.field("ttl_ms", step.ttl_us / 1000);
      w.field("amount", decision.request.hits);
      return;
    case HoldStatus::kCommitted:
      w.raw(R"("status":"committed")");
      w.field("actual", decision.request.hits);
      w.field("reserved", step.reserved);
      return;
    case HoldStatus::kLate:
      w.raw(R"("status":"late")");
      w.field("actual", decision.request.hits);
      return;
    case HoldStatus::kFull:
      w.raw(R"("status":"full")");
      w.field("reason", "a limit's bucket already holds --max-reservation-holds live reservations");
      return;
    default:
      w.raw(statusField(step.status));
      return;
  }
}

}  // namespace

Result<DecisionRequest> parseReservationRequest(std::string_view body, HoldOp op,
                                                std::string_view default_domain) {
  // Parsed in place into the Result that is returned, reusing this thread's spare request.
  Result<DecisionRequest> result(takeSpareRequest());
  if (parseReservationRequestFastInto(body, op, default_domain, *result)) {
    return result;
  }
  return parseReservationRequestComplete(body, op, default_domain);
}

Result<DecisionRequest> parseReservationRequestComplete(std::string_view body, HoldOp op,
                                                        std::string_view default_domain) {
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {
    return makeError(ErrorKind::kInvalidArgument, std::string("body: invalid JSON: ") + e.what());
  }
  if (!json.is_object()) {
    return makeError(ErrorKind::kInvalidArgument, "body: must be a JSON object");
  }
  ReservationRequest step;
  std::int64_t hits = 0;
  if (Status taken = takeStepFields(json, op, step, hits); !taken) {
    return taken.error();
  }
  auto request = parseDecisionRequestComplete(json.dump(), default_domain);
  if (!request) {
    return request.error();
  }
  request->hits = hits;
  request->reservation = std::move(step);
  return request;
}

Response reservationResponse(const Decision& decision) {
  const ReservationOutcome& step = decision.reservation;
  const std::string& id = decision.request.reservation.id;
  switch (step.status) {
    case HoldStatus::kSettled:
      return jsonError(409,
                       "reservation_id: " + id +
                           " was already committed or released: nothing charged or given back");
    case HoldStatus::kExpired:
      return jsonError(409, "reservation_id: " + id +
                                " expired before this release: its hold had already returned");
    case HoldStatus::kUnknown:
      return jsonError(404, "reservation_id: " + id +
                                " holds nothing on these limits and has not expired: not a "
                                "reservation of this store (another store, or made up)");
    default:
      break;
  }
  // The step's fields go first in the body: {"status":..., "reservation_id":...,
  // "allowed":..., ...}.
  return decisionResponse(decision.request, decision, writeStepFields);
}

namespace {

/// One step from its request to its answer (on the memory store, before this returns).
void serveStep(HoldOp op, DecisionService& decisions, std::string_view default_domain,
               const Request& request, Respond& respond) {
  Result<DecisionRequest> parsed = parseReservationRequest(request.body, op, default_domain);
  if (!parsed) {
    respond(jsonError(400, parsed.error().message));
    return;
  }
  decisions.decide(std::move(*parsed), [respond = std::move(respond)](Result<Decision>&& decision) {
    if (!decision) {
      respond(decisionErrorResponse(decision.error()));
      return;
    }
    respond(reservationResponse(*decision));
    recycleDecision(std::move(*decision));
  });
}

// One function per endpoint, never inlined, so that a profile tells the steps apart
// (bench/reservation_cost.sh reads the inclusive cost of serveReserve and serveCommit).
[[gnu::noinline]] void serveReserve(DecisionService& decisions, std::string_view default_domain,
                                    const Request& request, Respond& respond) {
  serveStep(HoldOp::kReserve, decisions, default_domain, request, respond);
}
[[gnu::noinline]] void serveCommit(DecisionService& decisions, std::string_view default_domain,
                                   const Request& request, Respond& respond) {
  serveStep(HoldOp::kCommit, decisions, default_domain, request, respond);
}
[[gnu::noinline]] void serveRelease(DecisionService& decisions, std::string_view default_domain,
                                    const Request& request, Respond& respond) {
  serveStep(HoldOp::kRelease, decisions, default_domain, request, respond);
}

}  // namespace

Handler reservationHandler(const HandlerContext& context, HoldOp op) {
  using Serve = void (*)(DecisionService&, std::string_view, const Request&, Respond&);
  const Serve serve = op == HoldOp::kReserve  ? serveReserve
                      : op == HoldOp::kCommit ? serveCommit
                                              : serveRelease;
  return [decisions = context.decisions, serve, default_domain = context.default_domain](
             const Request& request, Respond respond) {
    serve(*decisions, default_domain, request, respond);
  };
}

void addReservationRoutes(Router& router, const HandlerContext& context) {
  for (const HoldOp op : {HoldOp::kReserve, HoldOp::kCommit}) {
    router.add("POST", std::string(endpointOf(op)), reservationHandler(context, op));
  }
}

}  // namespace sluice::http
