#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/http/message.hpp"

namespace sluice::http {

/// The routing table of one listener: (method, path) -> handler.
///
/// How to add an endpoint (one line): write the handler in its own file under src/http/
/// (e.g. forward_auth.cpp with `void addForwardAuthRoutes(Router&, const HandlerContext&)`)
/// and call it from addDecisionPortRoutes() in routes.cpp, or register directly there:
///
///     router.add("GET", "/healthz", [](const Request&, Respond respond) { ... });
///
/// Paths match exactly, or as a prefix when the pattern ends with '*' ("/check*" matches
/// "/check" and "/check/anything"); exact routes win over prefixes, and the longest prefix
/// wins among prefixes. Method "*" accepts any method. A known path with the wrong method
/// answers 405 with an Allow header; an unknown path 404. The pattern is also the
/// `endpoint` label of the latency histogram, so labels stay bounded.
class Router {
 public:
  struct Route {
    std::string method;
    std::string pattern;
    Handler handler;
  };

  /// What route() found. `route_index` indexes routes(): the matched route, or for a 405 a
  /// route with the same pattern (the latency label); routes().size() for a 404.
  struct Match {
    const Route* route = nullptr;  ///< null: answer `status` (404 or 405)
    std::size_t route_index = 0;
    int status = 200;
    std::string allow;  ///< for 405: the methods the path accepts, "GET, POST"
  };

  /// Registers a route. Not thread-safe: build the table before serving; it is read-only
  /// afterwards and may then be shared between threads.
  void add(std::string method, std::string pattern, Handler handler);

  Match route(std::string_view method, std::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

/// The endpoint label for a request that matched no route.
inline constexpr std::string_view kUnmatchedEndpoint = "unmatched";

}  // namespace sluice::http
