#include "sluice/http/router.hpp"

#include <algorithm>
#include <utility>

namespace sluice::http {
namespace {

bool isPrefixPattern(std::string_view pattern) { return pattern.ends_with('*'); }

// Exact match scores highest; prefixes score by their length.
int matchScore(std::string_view pattern, std::string_view path) {
  if (isPrefixPattern(pattern)) {
    std::string_view prefix = pattern.substr(0, pattern.size() - 1);
    return path.starts_with(prefix) ? static_cast<int>(prefix.size()) : -1;
  }
  return pattern == path ? 1'000'000 : -1;
}

}  // namespace

void Router::add(std::string method, std::string pattern, Handler handler) {
  routes_.push_back(Route{std::move(method), std::move(pattern), std::move(handler)});
}

Router::Match Router::route(std::string_view method, std::string_view path) const {
  // The usual case first: an exact pattern with the method, which the scoring below would
  // choose too (an exact match outscores every prefix; the first in order wins).
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const Route& r = routes_[i];
    if (r.pattern == path && !isPrefixPattern(r.pattern) &&
        (r.method == method || r.method == "*")) {
      Match match;
      match.route = &r;
      match.route_index = i;
      return match;
    }
  }
  int best_score = -1;
  for (const auto& r : routes_) {
    best_score = std::max(best_score, matchScore(r.pattern, path));
  }
  Match match;
  match.route_index = routes_.size();
  if (best_score < 0) {
    match.status = 404;
    return match;
  }
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const Route& r = routes_[i];
    if (matchScore(r.pattern, path) != best_score) {
      continue;
    }
    if (r.method == "*" || r.method == method) {
      match.route = &r;
      match.route_index = i;
      match.status = 200;
      match.allow.clear();
      return match;
    }
    if (match.allow.find(r.method) == std::string::npos) {
      match.allow += match.allow.empty() ? "" : ", ";
      match.allow += r.method;
    }
  }
  match.status = 405;
  // The table's pattern is still the right latency label for a 405.
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    if (matchScore(routes_[i].pattern, path) == best_score) {
      match.route_index = i;
      break;
    }
  }
  return match;
}

}  // namespace sluice::http
