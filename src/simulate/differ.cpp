#include "simulate/differ.hpp"

#include <algorithm>

#include "sluice/simulate/access_record.hpp"

namespace sluice::simulate {

void TimeSeries::add(Micros at, std::uint64_t count) {
  if (at >= last_from_ && at < last_to_) {
    counts_[last_index_] += count;  // the bucket of the last add (no division)
    return;
  }
  if (counts_.empty()) {
    start_ = at - at % width_;
  }
  if (at < start_) {
    at = start_;  // the replay clock never goes back; a late line joins the first bucket
  }
  auto index = static_cast<std::size_t>((at - start_) / width_);
  while (index >= kMaxPoints) {
    alignTo(start_, width_ * 2);
    index = static_cast<std::size_t>((at - start_) / width_);
  }
  if (counts_.size() <= index) {
    counts_.resize(index + 1, 0);
  }
  counts_[index] += count;
  last_index_ = index;
  last_from_ = start_ + static_cast<Micros>(index) * width_;
  last_to_ = last_from_ + width_;
}

void TimeSeries::alignTo(Micros start, Micros width) {
  if (counts_.empty()) {
    start_ = start;
    width_ = width;
    last_to_ = last_from_;
    return;
  }
  std::vector<std::uint64_t> merged;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    const Micros at = start_ + static_cast<Micros>(i) * width_;
    const auto index = static_cast<std::size_t>((at - start) / width);
    if (merged.size() <= index) {
      merged.resize(index + 1, 0);
    }
    merged[index] += counts_[i];
  }
  counts_ = std::move(merged);
  start_ = start;
  width_ = width;
  last_to_ = last_from_;  // the buckets moved: the next add() computes its own
}

std::uint64_t RuleStats::clientsNewlyDenied() const {
  std::uint64_t n = 0;
  for (const auto& [who, c] : clients) {
    n += c.newly_denied > 0 ? 1 : 0;
  }
  return n;
}

std::uint64_t RuleStats::clientsNoLongerDenied() const {
  std::uint64_t n = 0;
  for (const auto& [who, c] : clients) {
    n += c.no_longer_denied > 0 ? 1 : 0;
  }
  return n;
}

void Differ::identity(const Decision& decision, std::size_t descriptor, std::string& out) {
  assignBucketIdentity(out, decision, descriptor);
}

namespace {

std::string describeLimit(const RateLimit& rule) {
  if (rule.unlimited) {
    return "unlimited";
  }
  std::string text = std::to_string(rule.requests_per_unit) + " per ";
  if (rule.unit_multiplier != 1) {
    text += std::to_string(rule.unit_multiplier) + " ";
  }
  text += unitName(rule.unit);
  text += ", ";
  text += algorithmName(rule.params.algorithm);
  if (rule.params.burst > 0) {
    text += " burst " + std::to_string(rule.params.burst);
  }
  if (rule.shadow_mode) {
    text += ", shadow";
  }
  if (rule.params.consistency == Consistency::kEventual) {
    text += ", eventual (replayed as strict)";
  }
  return text;
}

}  // namespace

RuleStats& Differ::ruleFor(const LimitStatus& limit, const DecisionRequest& request, bool is_new) {
  // Most limits are found in the small direct-mapped cache: a multiplication, no division.
  const std::size_t slot = (reinterpret_cast<std::uintptr_t>(limit.rule) * 0x9e3779b97f4a7c15ULL) >>
                           (64 - kRuleCacheBits);
  if (rule_cache_[slot].first == limit.rule && limit.rule != nullptr) {
    return *rule_cache_[slot].second;
  }
  auto cached = by_limit_.find(limit.rule);
  RuleStats* stats = nullptr;
  if (cached != by_limit_.end()) {
    stats = cached->second;
  } else {
    std::string key = request.domain + '\n' + limit.name;
    auto [it, inserted] = rules_.try_emplace(key);
    stats = &it->second;
    if (inserted) {
      stats->name = limit.name;
      stats->domain = request.domain;
    }
    const RateLimit& rule = *limit.rule;
    (is_new ? stats->limit_new : stats->limit_old) = describeLimit(rule);
    (is_new ? stats->shadow_new : stats->shadow_old) = rule.shadow_mode;
    stats->eventual = stats->eventual || rule.params.consistency == Consistency::kEventual;
    stats->sketch = stats->sketch || rule.params.algorithm == Algorithm::kSketch;
    if (is_new || stats->window_us == 0) {
      stats->limit_value = rule.requests_per_unit;
      // Two limits of one name may count different windows: the clients' windows started
      // with the other length are then found by division (countTouches()).
      stats->window_resized = stats->window_resized ||
                              (stats->window_us != 0 && stats->window_us != rule.params.window_us);
      stats->window_us = rule.params.window_us;
      stats->window_name = rule.unit_multiplier != 1 ? std::to_string(rule.unit_multiplier) + " " +
                                                           std::string(unitName(rule.unit))
                                                     : std::string(unitName(rule.unit));
    }
    by_limit_.emplace(limit.rule, stats);
  }
  rule_cache_[slot] = {limit.rule, stats};
  return *stats;
}

void Differ::count(const Decision& decision, bool is_new, Pending& pending) {
  const DecisionRequest& request = decision.request;
  // The identity depends on the descriptor only: computed once for all its limits, and
  // the new rules' descriptor 0 is the request's own (add() has it, names[0]).
  std::size_t who_of = decision.descriptors.size();
  std::size_t who = 0;
  std::size_t who_hash = 0;
  for (std::size_t d = 0; d < decision.descriptors.size(); ++d) {
    const DescriptorStatus& ds = decision.descriptors[d];
    for (const LimitStatus& limit : ds.limits) {
      if (limit.rule == nullptr || limit.from_request || limit.unlimited) {
        continue;
      }
      RuleStats& rule = ruleFor(limit, request, is_new);
      if (who_of != d) {
        who_of = d;
        if ((is_new && d == 0) ||
            (!request.client_id.empty() && request.client_id == pending.names[0])) {
          // Descriptor 0 of the new rules is the request's own; a client id is the
          // identity of every descriptor under either rules.
          who = 0;
          who_hash = pending.client_hash;
        } else {
          identity(decision, d, who_);
          who = pending.names_used;
          for (std::size_t n = 0; n < pending.names_used; ++n) {
            if (pending.names[n] == who_) {
              who = n;
              break;
            }
          }
          if (who == pending.names_used) {
            if (pending.names.size() == who) {
              pending.names.emplace_back();
            }
            pending.names[who].assign(who_);
            ++pending.names_used;
          }
          who_hash = identityHash(who_);
        }
      }
      Touch* touch = nullptr;
      for (Touch& t : pending.touches) {
        if (t.rule == &rule && t.who == who) {
          touch = &t;
          break;
        }
      }
      if (touch == nullptr) {
        std::int64_t hits = request.hits;
        if (d < request.descriptor_hits.size() && request.descriptor_hits[d]) {
          hits = *request.descriptor_hits[d];
        }
        pending.touches.push_back(Touch{&rule, who, who_hash, false, false, false, false, hits});
        touch = &pending.touches.back();
        rule.clients.prefetchCell(who_hash);
      }
      const bool denied = !limit.outcome.allowed;
      if (is_new) {
        touch->new_matched = true;
        touch->new_denied = touch->new_denied || denied;
      } else {
        touch->old_matched = true;
        touch->old_denied = touch->old_denied || denied;
      }
    }
  }
}

void Differ::add(Micros at, const Decision* old_decision, const Decision& new_decision,
                 std::string_view logged, std::string_view logged_rule) {
  if (totals_.requests == 0) {
    totals_.first_us = at;
  }
  totals_.last_us = std::max(totals_.last_us, at);
  ++totals_.requests;
  Pending& pending = pending_[added_++ % kPipeline];  // counted: at most kPipeline - 1 wait
  pending.at = at;
  pending.touches.clear();
  // The request's "who": its client id, else the first descriptor's entries (names[0]).
  if (pending.names.empty()) {
    pending.names.emplace_back();
  }
  identity(new_decision, 0, pending.names[0]);
  pending.names_used = 1;
  pending.client_hash = identityHash(pending.names[0]);
  clients_.prefetchCell(pending.client_hash);
  if (old_decision != nullptr) {
    count(*old_decision, false, pending);
  }
  count(new_decision, true, pending);
  pending.old_denied = old_decision != nullptr && !old_decision->allowed;
  pending.new_denied = !new_decision.allowed;
  totals_.denied_old += pending.old_denied ? 1 : 0;
  totals_.denied_new += pending.new_denied ? 1 : 0;
  if (old_decision != nullptr && !logged.empty() && logged != "error") {
    compareWithLog(at, *old_decision, new_decision, logged, logged_rule);
  }
  // The pipeline's middle step for the request before this one; the oldest is counted by
  // the next add() (or by finish()).
  if (added_ - counted_ >= 2) {
    fetchEntries(pending_[(added_ - 2) % kPipeline]);
  }
  if (added_ - counted_ == kPipeline) {
    countPending(pending_[counted_++ % kPipeline]);
  }
}

void Differ::finish() {
  while (counted_ < added_) {
    countPending(pending_[counted_++ % kPipeline]);
  }
}

void Differ::fetchEntries(const Pending& pending) const {
  for (const Touch& t : pending.touches) {
    t.rule->clients.prefetchEntry(t.hash);
  }
  clients_.prefetchEntry(pending.client_hash);
}

void Differ::countPending(Pending& pending) {
  countTouches(pending);
  countClient(pending);
}

void Differ::countTouches(const Pending& pending) {
  const Micros at = pending.at;
  for (const Touch& t : pending.touches) {
    RuleStats& rule = *t.rule;
    ClientStats& client = rule.clients.obtain(HashedIdentity{pending.names[t.who], t.hash});
    ++rule.matched;
    ++client.matched;
    rule.matched_old += t.old_matched ? 1 : 0;
    rule.matched_new += t.new_matched ? 1 : 0;
    if (t.old_denied) {
      ++rule.denied_old;
      ++client.denied_old;
      rule.series_old.add(at, 1);
    }
    if (t.new_denied) {
      ++rule.denied_new;
      ++client.denied_new;
      rule.series_new.add(at, 1);
    }
    if (t.new_denied && !t.old_denied) {
      ++client.newly_denied;
    } else if (t.old_denied && !t.new_denied) {
      ++client.no_longer_denied;
    }
    if (rule.window_us > 0) {
      // The window being counted while `at` is in it (the usual case, without a division;
      // windows of times before the epoch are left to the division, which rounds them up).
      const Micros start = client.window_start;
      const Micros window =
          !rule.window_resized && start >= 0 && at >= start && at - start < rule.window_us
              ? start
              : at - at % rule.window_us;
      if (window != client.window_start) {
        client.window_start = window;
        client.window_hits = 0;
      }
      client.window_hits += t.hits;
      if (client.window_hits > client.peak) {
        client.peak = client.window_hits;
        client.peak_at = window;
      }
    }
  }
}

void Differ::countClient(const Pending& pending) {
  const bool old_denied = pending.old_denied;
  const bool new_denied = pending.new_denied;
  const std::size_t before = clients_.size();
  ClientTotals& client = clients_.obtain(HashedIdentity{pending.names[0], pending.client_hash});
  if (clients_.size() != before) {
    ++totals_.clients;
  }
  if (new_denied && !old_denied) {
    ++totals_.newly_denied;
    if (client.newly++ == 0) {
      ++totals_.clients_newly_denied;
    }
  } else if (old_denied && !new_denied) {
    ++totals_.no_longer_denied;
    if (client.no_longer++ == 0) {
      ++totals_.clients_no_longer_denied;
    }
  }
}

void Differ::compareWithLog(Micros at, const Decision& old_decision, const Decision& new_decision,
                            std::string_view logged, std::string_view logged_rule) {
  ++totals_.compared;
  const std::string_view replayed = decisionWord(old_decision);
  const LimitStatus* binding = bindingLimit(old_decision);
  const std::string_view replayed_rule =
      binding != nullptr ? std::string_view(binding->name) : std::string_view();
  if (replayed == logged && replayed_rule == logged_rule) {
    ++totals_.agreed;
  } else {
    const std::string_view blame = logged_rule.empty() ? replayed_rule : logged_rule;
    for (auto& [key, rule] : rules_) {
      if (rule.name == blame && rule.domain == new_decision.request.domain) {
        ++rule.mismatches;
      }
    }
    if (mismatch_samples_.size() < 10) {
      std::string sample;
      appendRfc3339Micros(sample, at);
      sample += ": logged " + std::string(logged) + " (" + std::string(logged_rule) +
                "), replayed " + std::string(replayed) + " (" + std::string(replayed_rule) + ")";
      mismatch_samples_.push_back(std::move(sample));
    }
  }
}

std::vector<const RuleStats*> Differ::rules() const {
  settle();
  std::vector<const RuleStats*> out;
  out.reserve(rules_.size());
  for (const auto& [key, rule] : rules_) {
    out.push_back(&rule);
  }
  std::sort(out.begin(), out.end(), [](const RuleStats* a, const RuleStats* b) {
    return a->domain != b->domain ? a->domain < b->domain : a->name < b->name;
  });
  return out;
}

}  // namespace sluice::simulate
