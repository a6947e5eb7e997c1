#include "http/admin_routes.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

#include "http/decision_codec.hpp"
#include "http/request_attributes.hpp"

namespace sluice::http {
Result<TopDenialsQuery> parseTopQuery(std::string_view query) {
  TopDenialsQuery out;
  // Unknown parameters are refused, so that a typo (?rules=) does not silently widen the answer.
  std::string_view rest = query;
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) {
      continue;
    }
    std::string_view name = pair.substr(0, pair.find('='));
    if (name != "domain" && name != "rule" && name != "n" && name != "candidate") {
      return makeError(ErrorKind::kInvalidArgument, "query: unknown parameter \"" +
                                                        std::string(name) +
                                                        "\" (expected domain, rule, n, candidate)");
    }
  }
  if (auto candidate = queryValue(query, "candidate")) {
    if (*candidate != "1" && *candidate != "true" && *candidate != "0" && *candidate != "false") {
      return makeError(ErrorKind::kInvalidArgument,
                       "query: candidate must be 1 or 0, got \"" + *candidate + "\"");
    }
    out.candidate = *candidate == "1" || *candidate == "true";
  }
  out.domain = queryValue(query, "domain").value_or("");
  out.rule = queryValue(query, "rule").value_or("");
  if (auto n = queryValue(query, "n")) {
    std::size_t value = 0;
    auto [end, ec] = std::from_chars(n->data(), n->data() + n->size(), value);
    if (ec != std::errc() || end != n->data() + n->size() || value < 1 || value > kMaxTopClients) {
      return makeError(ErrorKind::kInvalidArgument, "query: n must be an integer from 1 to " +
                                                        std::to_string(kMaxTopClients) +
                                                        ", got \"" + *n + "\"");
    }
    out.n = value;
  }
  return out;
}

std::string topDenialsJson(const TopDenialsReport& report, const TopDenialsOptions& options,
                           const std::vector<StoredOverridePtr>& overrides) {
  std::vector<std::pair<OverrideRecordView, const StoredOverride*>> views;
  for (const StoredOverridePtr& value : overrides) {
    if (auto view = viewOverrideRecord(*value)) {
      views.emplace_back(std::move(*view), value.get());
    }
  }
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (const RuleTopDenials& rule : report.rules) {
    nlohmann::ordered_json clients = nlohmann::ordered_json::array();
    for (const SpaceSaving::Entry& client : rule.clients) {
      nlohmann::ordered_json item = {
          {"client", client.key}, {"count", client.count}, {"error", client.error}};
      for (const auto& [view, value] : views) {
        if (view.domain == rule.domain && view.rule == rule.rule && view.client_id == client.key) {
          nlohmann::ordered_json applied = {{"requests_per_unit", value->requests_per_unit},
                                            {"unit", unitName(value->unit)},
                                            {"reason", value->reason}};
          if (value->expires_at_us != 0) {
            applied["expires_at_ms"] = value->expires_at_us / kMicrosPerMilli;
          }
          item["override"] = std::move(applied);
          break;
        }
      }
      clients.push_back(std::move(item));
    }
    rules.push_back({{"domain", rule.domain},
                     {"rule", rule.rule},
                     {"candidate", rule.candidate},
                     {"denied", rule.denied},
                     {"error_bound", rule.error_bound},
                     {"clients", std::move(clients)}});
  }
  nlohmann::ordered_json body = {{"from_ms", report.from_us / kMicrosPerMilli},
                                 {"to_ms", report.to_us / kMicrosPerMilli},
                                 {"window_seconds", options.window_us / kMicrosPerSecond},
                                 {"capacity", options.capacity},
                                 {"rules", std::move(rules)}};
  // Forward-auth client ids are raw header bytes: replace what is not UTF-8 rather than fail.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

/// Every route of `routes` added to `router`, each asking for the token first.
void addGuarded(Router& router, const Router& routes, std::shared_ptr<AdminToken> token) {
  for (const Router::Route& route : routes.routes()) {
    if (!token) {
      router.add(route.method, route.pattern, route.handler);
      continue;
    }
    router.add(route.method, route.pattern,
               [token, handler = route.handler](const Request& request, Respond respond) {
                 if (!token->accepts(request.header("Authorization"))) {
                   spdlog::warn("admin: {} {} from {} refused: {} bearer token", request.method,
                                request.path, request.peer,
                                request.header("Authorization").empty() ? "no" : "a wrong");
                   Response refused = jsonError(401,
                                                "unauthorized: this admin listener needs "
                                                "Authorization: Bearer <token>");
                   refused.headers.push_back({"WWW-Authenticate", "Bearer"});
                   respond(std::move(refused));
                   return;
                 }
                 handler(request, std::move(respond));
               });
  }
}

void addLimitsRoutes(Router& router, const AdminContext& context);

}  // namespace

Respond answeredOn(const PostTask& post, Respond respond) {
  if (!post) {
    return respond;
  }
  return [post, respond = std::move(respond)](Response response) mutable {
    post([respond = std::move(respond), response = std::move(response)]() mutable {
      respond(std::move(response));
    });
  };
}

void addAdminRoutes(Router& router, const AdminContext& context) {
  Router routes;
  addLimitsRoutes(routes, context);
  addGuarded(router, routes, context.token);
}

namespace {

/// GET /limits/top: the most denied clients per rule, with their overrides.
void addTopRoute(Router& router, const AdminContext& context) {
  if (context.top == nullptr) {
    return;
  }
  router.add(
      "GET", "/limits/top",
      [top = context.top, overrides = context.overrides, post = context.answer_on](
          const Request& request, Respond respond) {
        const std::size_t mark = request.target.find('?');
        const std::string_view query = mark == std::string::npos
                                           ? std::string_view()
                                           : std::string_view(request.target).substr(mark + 1);
        Result<TopDenialsQuery> parsed = parseTopQuery(query);
        if (!parsed) {
          respond(jsonError(400, parsed.error().message));
          return;
        }
        if (overrides == nullptr) {
          Response response;
          response.body = topDenialsJson(top->report(*parsed), top->options());
          respond(std::move(response));
          return;
        }
        // The report is taken now; the overrides come back on a decision thread, the
        // answer is written on this one.
        overrides->list(OverrideFilter{parsed->domain, "", parsed->rule},
                        [report = top->report(*parsed), options = top->options(),
                         respond = answeredOn(post, std::move(respond))](
                            Result<std::vector<StoredOverridePtr>> listed) {
                          Response response;
                          response.body = topDenialsJson(
                              report, options, listed ? *listed : std::vector<StoredOverridePtr>{});
                          respond(std::move(response));
                        });
      });
}

void addLimitsRoutes(Router& router, const AdminContext& context) {
  router.add("DELETE", "/limits", [context](const Request& request, Respond respond) {
    Result<DecisionRequest> parsed =
        parseDecisionRequest(request.body, context.operations.default_domain);
    if (!parsed) {
      respond(jsonError(400, parsed.error().message));
      return;
    }
    auto answer = [domain = parsed->domain, client = parsed->client_id, peer = request.peer,
                   respond](Result<std::size_t> removed) {
      if (!removed) {
        spdlog::warn("admin: reset of client \"{}\" in domain {} from {} failed: {}", client,
                     domain, peer, removed.error().message);
        respond(decisionErrorResponse(removed.error()));
        return;
      }
      // An audit trail of every state change made through the admin port.
      spdlog::info("admin: reset {} bucket(s) of client \"{}\" in domain {} (from {})", *removed,
                   client, domain, peer);
      respond(jsonResponse(200, {{"reset", true},
                                 {"domain", domain},
                                 {"clientId", client},
                                 {"buckets_removed", *removed}}));
    };
    Status started =
        context.reset->reset(*parsed, [answer = std::move(answer), post = context.answer_on](
                                          Result<std::size_t> removed) mutable {
          if (!post) {
            answer(std::move(removed));
            return;
          }
          post([answer = std::move(answer), removed = std::move(removed)]() mutable {
            answer(std::move(removed));
          });
        });
    if (!started) {
      const ErrorKind kind = started.error().kind;
      respond(jsonError(kind == ErrorKind::kNotFound      ? 404
                        : kind == ErrorKind::kUnavailable ? 503
                                                          : 400,
                        started.error().message));
    }
  });
  addTopRoute(router, context);
  if (context.overrides != nullptr) {
    addOverrideRoutes(router, context);
  }
  addOperationsRoutes(router, context.operations);
}

}  // namespace

}  // namespace sluice::http
