#include "sluice/common/top_denials.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

namespace sluice {
namespace {

std::int64_t windowIndex(Micros now, Micros window) {
  std::int64_t index = now / window;
  if (now % window < 0) {
    --index;  // floor for times before the epoch
  }
  return index;
}

bool matches(const TopDenialsQuery& query, std::string_view domain, std::string_view rule,
             bool candidate) {
  return query.candidate == candidate && (query.domain.empty() || query.domain == domain) &&
         (query.rule.empty() || query.rule == rule);
}

}  // namespace

TopDenials::TopDenials(TopDenialsOptions options) : options_(options) {
  if (options_.window_us <= 0) {
    options_.window_us = TopDenialsOptions{}.window_us;
  }
  options_.capacity = std::max<std::size_t>(options_.capacity, 1);
}

void TopDenials::record(std::string_view domain, std::string_view rule, std::string_view client,
                        Micros now, bool candidate) {
  const std::int64_t index = windowIndex(now, options_.window_us);
  std::lock_guard lock(mutex_);
  if (index > last_sweep_) {
    dropStale(index);
    last_sweep_ = index;
  }
  key_.assign(domain);
  key_ += '\0';
  key_ += rule;
  if (candidate) {
    key_ += '\0';
    key_ += 'c';
  }
  auto it = rules_.find(key_);
  if (it == rules_.end()) {
    it = rules_
             .emplace(key_, std::make_unique<RuleState>(std::string(domain), std::string(rule),
                                                        candidate, options_.capacity))
             .first;
  }
  RuleState& state = *it->second;
  Window& current = *state.current;
  if (current.index < index) {
    if (current.index == index - 1) {
      std::swap(state.current, state.previous);
    } else {
      state.previous->summary.clear();
      state.previous->index = -1;
    }
    state.current->summary.clear();
    state.current->index = index;
  }
  // A time before the current window (the wall clock stepped back) counts in the current
  // window rather than being lost.
  state.current->summary.add(client);
}

void TopDenials::dropStale(std::int64_t window_index) {
  for (auto it = rules_.begin(); it != rules_.end();) {
    if (it->second->current->index < window_index - 1) {
      it = rules_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<TopDenials::Part> TopDenials::parts(const TopDenialsQuery& query, Micros now) const {
  const std::int64_t index = windowIndex(now, options_.window_us);
  std::vector<Part> out;
  std::lock_guard lock(mutex_);
  for (const auto& [key, state] : rules_) {
    if (!matches(query, state->domain, state->rule, state->candidate)) {
      continue;
    }
    for (const Window* window : {state->current.get(), state->previous.get()}) {
      if (window->index >= index - 1 && window->summary.total() > 0) {
        out.push_back(
            Part{state->domain, state->rule, window->summary.snapshot(), state->candidate});
      }
    }
  }
  return out;
}

TopDenialsBoard::TopDenialsBoard(TopDenialsOptions options, const Clock& clock)
    : options_(options), clock_(clock) {}

TopDenials& TopDenialsBoard::addThread() {
  threads_.push_back(std::make_unique<TopDenials>(options_));
  return *threads_.back();
}

TopDenialsReport TopDenialsBoard::report(const TopDenialsQuery& query) const {
  const Micros now = clock_.nowMicros();
  std::vector<TopDenials::Part> parts;
  for (const auto& thread : threads_) {
    auto more = thread->parts(query, now);
    std::move(more.begin(), more.end(), std::back_inserter(parts));
  }
  return mergeTopDenials(parts, query, options_, now);
}

TopDenialsReport mergeTopDenials(const std::vector<TopDenials::Part>& parts,
                                 const TopDenialsQuery& query, const TopDenialsOptions& options,
                                 Micros now) {
  const Micros window = options.window_us > 0 ? options.window_us : TopDenialsOptions{}.window_us;
  const std::uint64_t k = std::max<std::size_t>(options.capacity, 1);
  TopDenialsReport report;
  report.from_us = (windowIndex(now, window) - 1) * window;
  report.to_us = now;
  std::map<std::pair<std::string, std::string>, std::vector<SpaceSaving::Snapshot>> by_rule;
  for (const TopDenials::Part& part : parts) {
    if (matches(query, part.domain, part.rule, part.candidate)) {
      by_rule[{part.domain, part.rule}].push_back(part.summary);
    }
  }
  for (auto& [name, summaries] : by_rule) {
    RuleTopDenials rule;
    rule.domain = name.first;
    rule.rule = name.second;
    rule.candidate = query.candidate;
    for (const SpaceSaving::Snapshot& summary : summaries) {
      rule.denied += summary.total;
      // A counter's error is at most the smallest count when it was taken, and k counters
      // that sum to at most N have a smallest of at most floor(N / k).
      rule.error_bound += summary.total / k;
    }
    rule.clients = SpaceSaving::merge(summaries, query.n);
    report.rules.push_back(std::move(rule));
  }
  return report;
}

}  // namespace sluice
