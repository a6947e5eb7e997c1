#include "sluice/simulate/simulate_command.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "simulate/differ.hpp"
#include "simulate/html_report.hpp"
#include "simulate/huge_page_heap.hpp"
#include "simulate/log_map.hpp"
#include "simulate/log_source.hpp"
#include "simulate/reorder_buffer.hpp"
#include "simulate/replayer.hpp"
#include "sluice/common/value_parsers.hpp"
#include "sluice/simulate/access_record.hpp"

namespace sluice::simulate {
namespace {

struct Arguments {
  std::string rules;
  std::vector<std::string> baselines;
  std::vector<std::string> logs;
  std::string map;
  std::string html;
  std::string client;
  bool json = false;
  bool strict = false;
  bool help = false;
  std::size_t top = 10;
  std::optional<double> fail_requests_pct;
  std::optional<double> fail_clients_pct;
};

bool parsePercent(const std::string& text, double& out) {
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && std::isfinite(out) && out >= 0 && out <= 100;
}

/// An option that takes a value: `value` (not empty) into `a`.
Status setValue(Arguments& a, const std::string& name, const std::string& v) {
  if (name == "--rules") {
    a.rules = v;
  } else if (name == "--baseline") {
    a.baselines.push_back(v);
  } else if (name == "--log") {
    a.logs.push_back(v);
  } else if (name == "--map") {
    a.map = v;
  } else if (name == "--html") {
    a.html = v;
  } else if (name == "--client") {
    a.client = v;
  } else if (name == "--top") {
    auto n = parseInteger<std::size_t>(v, 1, 1000);
    if (!n) {
      return makeError(ErrorKind::kInvalidArgument, "--top " + n.error().message);
    }
    a.top = *n;
  } else {
    double pct = 0;
    if (!parsePercent(v, pct)) {
      return makeError(ErrorKind::kInvalidArgument,
                       name + " must be a percentage from 0 to 100, got \"" + v + "\"");
    }
    (name == "--fail-if-newly-denied" ? a.fail_requests_pct : a.fail_clients_pct) = pct;
  }
  return {};
}

Result<Arguments> parseArguments(const std::vector<std::string>& args) {
  Arguments a;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> inline_value;
    if (name.rfind("--", 0) == 0) {
      const std::size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    }
    auto value = [&]() -> Result<std::string> {
      if (inline_value) {
        return *inline_value;
      }
      if (i + 1 >= args.size()) {
        return makeError(ErrorKind::kInvalidArgument, name + " needs a value");
      }
      return args[++i];
    };
    auto flag = [&](bool& out) -> Status {
      if (inline_value) {
        return makeError(ErrorKind::kInvalidArgument, name + " takes no value");
      }
      out = true;
      return {};
    };
    Status status;
    if (name == "--help" || name == "-h") {
      status = flag(a.help);
    } else if (name == "--json") {
      status = flag(a.json);
    } else if (name == "--strict") {
      status = flag(a.strict);
    } else if (name == "--rules" || name == "--baseline" || name == "--log" || name == "--map" ||
               name == "--html" || name == "--client" || name == "--top" ||
               name == "--fail-if-newly-denied" || name == "--fail-if-newly-denied-clients") {
      auto v = value();
      if (!v) {
        return v.error();
      }
      if (v->empty()) {
        return makeError(ErrorKind::kInvalidArgument, name + " must not be empty");
      }
      if (Status set = setValue(a, name, *v); !set) {
        return set.error();
      }
    } else if (name.rfind("-", 0) == 0 && name != "-") {
      return makeError(ErrorKind::kInvalidArgument, "unknown option " + name + " (see --help)");
    } else {
      a.logs.push_back(name);  // a bare argument is one more log
    }
    if (!status) {
      return status.error();
    }
  }
  if (a.help) {
    return a;
  }
  if (a.rules.empty()) {
    return makeError(ErrorKind::kInvalidArgument, "--rules is required (the rules to try)");
  }
  if (a.logs.empty()) {
    return makeError(ErrorKind::kInvalidArgument, "--log is required (the requests to replay)");
  }
  return a;
}

Result<RuleSetPtr> loadSet(const std::string& path, std::ostream& err) {
  LoadResult loaded = loadRules(path);
  if (!loaded.errors.empty()) {
    for (const RuleError& error : loaded.errors) {
      err << error.toString() << "\n";
    }
    return makeError(ErrorKind::kInvalidArgument, path + ": invalid rules");
  }
  return loaded.rules;
}

void copyRequest(const DecisionRequest& from, DecisionRequest& to) {
  to.domain.assign(from.domain);
  to.client_id.assign(from.client_id);
  to.descriptors.resize(from.descriptors.size());
  for (std::size_t d = 0; d < from.descriptors.size(); ++d) {
    Descriptor& target = to.descriptors[d];
    const Descriptor& source = from.descriptors[d];
    target.resize(source.size());
    for (std::size_t e = 0; e < source.size(); ++e) {
      target[e].key.assign(source[e].key);
      target[e].value.assign(source[e].value);
    }
  }
  to.hits = from.hits;
  to.descriptor_hits = from.descriptor_hits;
  to.descriptor_limits = from.descriptor_limits;
  to.refund = from.refund;
  to.descriptor_refunds = from.descriptor_refunds;
  to.charge = from.charge;
  to.envoy_api = from.envoy_api;
}

std::string withCommas(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  const std::size_t first = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  out += digits.substr(0, first);
  for (std::size_t i = first; i < digits.size(); i += 3) {
    out += ',';
    out += digits.substr(i, 3);
  }
  return out;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %%",
                whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

double ratio(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

struct Malformed {
  std::uint64_t count = 0;
  std::vector<std::string> samples;  // "file:line: message"
};

/// The most affected clients of a rule: by how much their denials changed.
std::vector<std::pair<const std::string*, const ClientStats*>> topClients(const RuleStats& rule,
                                                                          std::size_t n) {
  std::vector<std::pair<const std::string*, const ClientStats*>> all;
  for (const auto& [who, c] : rule.clients) {
    if (c.denied_new != c.denied_old) {
      all.emplace_back(&who, &c);
    }
  }
  auto change = [](const ClientStats* c) {
    return c->denied_new > c->denied_old ? c->denied_new - c->denied_old
                                         : c->denied_old - c->denied_new;
  };
  const std::size_t keep = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    [&](const auto& a, const auto& b) {
                      const auto ca = change(a.second);
                      const auto cb = change(b.second);
                      return ca != cb ? ca > cb : *a.first < *b.first;
                    });
  all.resize(keep);
  return all;
}

struct RunFacts {
  std::uint64_t lines = 0;
  std::uint64_t skipped_errors = 0;  // lines whose logged decision was "error"
  std::uint64_t capacity_evictions = 0;
  Malformed malformed;
  std::vector<std::string> notes;
};

std::string timeText(Micros t) {
  std::string out;
  appendRfc3339Micros(out, t);
  return out;
}

void writeText(std::ostream& out, const Differ& differ, const RunFacts& facts, std::size_t top) {
  const Totals& t = differ.totals();
  out << "simulate: " << withCommas(t.requests) << " requests";
  if (t.requests > 0) {
    out << " (" << timeText(t.first_us) << " .. " << timeText(t.last_us) << ")";
  }
  out << ": newly denied " << withCommas(t.newly_denied) << " ("
      << percent(t.newly_denied, t.requests) << ") of requests, "
      << withCommas(t.clients_newly_denied) << " of " << withCommas(t.clients) << " clients ("
      << percent(t.clients_newly_denied, t.clients) << "); no longer denied "
      << withCommas(t.no_longer_denied) << " requests, " << withCommas(t.clients_no_longer_denied)
      << " clients; denied " << percent(t.denied_old, t.requests) << " under the "
      << (differ.hasBaseline() ? "baseline" : "baseline (none: no limits)") << ", "
      << percent(t.denied_new, t.requests) << " under the new rules\n";
  if (t.compared > 0) {
    out << "recorded decisions: the baseline reproduces " << withCommas(t.agreed) << " of "
        << withCommas(t.compared) << " (" << percent(t.agreed, t.compared) << ")\n";
    for (const std::string& sample : differ.mismatchSamples()) {
      out << "  differs at " << sample << "\n";
    }
  }
  if (facts.malformed.count > 0) {
    out << "malformed lines: " << withCommas(facts.malformed.count) << " (skipped)\n";
    for (const std::string& sample : facts.malformed.samples) {
      out << "  " << sample << "\n";
    }
  }
  for (const std::string& note : facts.notes) {
    out << "note: " << note << "\n";
  }
  for (const RuleStats* rule : differ.rules()) {
    out << "\nrule " << rule->name << " (domain " << rule->domain << ")\n";
    out << "  baseline: " << (rule->limit_old.empty() ? "-" : rule->limit_old)
        << "\n  new:      " << (rule->limit_new.empty() ? "-" : rule->limit_new) << "\n";
    out << "  matched " << withCommas(rule->matched) << ", denied " << withCommas(rule->denied_old)
        << " under the baseline, " << withCommas(rule->denied_new) << " under the new rules; "
        << withCommas(rule->clientsNewlyDenied()) << " clients newly denied, "
        << withCommas(rule->clientsNoLongerDenied()) << " no longer denied\n";
    const auto clients = topClients(*rule, top);
    if (!clients.empty()) {
      out << "  most affected:\n";
      for (const auto& [who, c] : clients) {
        out << "    " << (who->empty() ? "\"\"" : *who) << ": denied " << withCommas(c->denied_old)
            << " -> " << withCommas(c->denied_new) << " of " << withCommas(c->matched)
            << " requests; peak " << withCommas(static_cast<std::uint64_t>(c->peak)) << " per "
            << rule->window_name << " vs limit " << rule->limit_value << "\n";
      }
    }
  }
}

nlohmann::ordered_json toJson(const Differ& differ, const RunFacts& facts, std::size_t top) {
  using nlohmann::ordered_json;
  const Totals& t = differ.totals();
  ordered_json doc;
  ordered_json summary;
  summary["requests"] = t.requests;
  summary["first"] = t.requests > 0 ? timeText(t.first_us) : "";
  summary["last"] = t.requests > 0 ? timeText(t.last_us) : "";
  summary["baseline"] = differ.hasBaseline();
  summary["denied_baseline"] = t.denied_old;
  summary["denied_new"] = t.denied_new;
  summary["newly_denied"] = t.newly_denied;
  summary["newly_denied_pct"] = ratio(t.newly_denied, t.requests);
  summary["no_longer_denied"] = t.no_longer_denied;
  summary["clients"] = t.clients;
  summary["clients_newly_denied"] = t.clients_newly_denied;
  summary["clients_newly_denied_pct"] = ratio(t.clients_newly_denied, t.clients);
  summary["clients_no_longer_denied"] = t.clients_no_longer_denied;
  summary["recorded_decisions_compared"] = t.compared;
  summary["recorded_decisions_reproduced"] = t.agreed;
  summary["lines"] = facts.lines;
  summary["malformed_lines"] = facts.malformed.count;
  summary["skipped_error_lines"] = facts.skipped_errors;
  doc["summary"] = summary;
  doc["malformed"] = facts.malformed.samples;
  doc["notes"] = facts.notes;
  doc["differences"] = differ.mismatchSamples();
  ordered_json rules = ordered_json::array();
  for (const RuleStats* rule : differ.rules()) {
    ordered_json r;
    r["domain"] = rule->domain;
    r["rule"] = rule->name;
    r["baseline_limit"] = rule->limit_old;
    r["new_limit"] = rule->limit_new;
    r["matched"] = rule->matched;
    r["denied_baseline"] = rule->denied_old;
    r["denied_new"] = rule->denied_new;
    r["clients_newly_denied"] = rule->clientsNewlyDenied();
    r["clients_no_longer_denied"] = rule->clientsNoLongerDenied();
    r["recorded_decisions_differing"] = rule->mismatches;
    r["eventual_replayed_as_strict"] = rule->eventual;
    r["sketch"] = rule->sketch;
    ordered_json clients = ordered_json::array();
    for (const auto& [who, c] : topClients(*rule, top)) {
      clients.push_back({{"client", *who},
                         {"matched", c->matched},
                         {"denied_baseline", c->denied_old},
                         {"denied_new", c->denied_new},
                         {"peak", c->peak},
                         {"peak_at", timeText(c->peak_at)},
                         {"per", rule->window_name},
                         {"limit", rule->limit_value}});
    }
    r["most_affected"] = clients;
    rules.push_back(std::move(r));
  }
  doc["rules"] = rules;
  return doc;
}

}  // namespace

std::string simulateHelp() {
  return R"(Usage: sluice simulate --rules NEW [--baseline OLD]... --log FILE... [options]

Replays recorded requests, in their own time, through the memory store's algorithms under
the baseline rules and the new rules, and reports whom the change would deny.

  --rules PATH        the rules to try (file or directory)
  --baseline PATH     the rules in force when the log was written (default: none, nothing
                      denied). Repeat it for a log that spans a rules change: each line is
                      decided by the baseline whose hash it records, else by the first.
  --log FILE          a log to replay (JSON lines; .gz read directly; - is stdin); repeat
                      for several (one request stream, replayed in time order)
  --map FILE          read another proxy's JSON log (nginx, Envoy) through this mapping
  --json              the report as JSON
  --html FILE         also write a self-contained HTML report
  --client WHO        the client whose rate the HTML report charts (default: the most
                      affected)
  --top N             most affected clients per rule (default 10)
  --strict            stop at the first malformed line (exit 2)
  --fail-if-newly-denied PCT          exit 3 when more than PCT % of the requests would
                                      newly be denied
  --fail-if-newly-denied-clients PCT  exit 4 when more than PCT % of the clients would

Exit status: 0 passed, 1 error (arguments, rules, map, unreadable log), 2 malformed line
under --strict, 3 and 4 the gates above, 5 empty log (no request to replay).
)";
}

namespace {

/// Nothing but spaces and tabs (a line the replay skips). A log line starts with `{`: one
/// compare, where find_first_not_of calls memchr for each byte it looks at.
bool blank(std::string_view line) {
  for (const char c : line) {
    if (c != ' ' && c != '\t') {
      return false;
    }
  }
  return true;
}

/// One `sluice simulate` run: the rule sets and the map it loaded, and the passes over
/// the logs that replay them.
class Simulation {
 public:
  Simulation(const Arguments& a, std::ostream& out, std::ostream& err)
      : a_(a), out_(out), err_(err) {}

  /// Loads the new rules, the baselines and the map; false after saying why.
  bool load() {
    auto rules = loadSet(a_.rules, err_);
    if (!rules) {
      return failed(rules.error().message);
    }
    rules_ = *rules;
    for (const std::string& path : a_.baselines) {
      auto set = loadSet(path, err_);
      if (!set) {
        return failed(set.error().message);
      }
      baselines_.push_back(*set);
    }
    if (!a_.map.empty()) {
      auto loaded = LogMap::load(a_.map);
      if (!loaded) {
        return failed(loaded.error().message);
      }
      map_ = std::move(*loaded);
    }
    return true;
  }

  int run() {
    Differ differ(!baselines_.empty());
    HtmlRecorder html(a_.client);
    RunFacts facts;
    if (const int status = pass(differ, a_.html.empty() ? nullptr : &html, facts);
        status != kExitPassed) {
      return status;
    }
    if (!a_.html.empty() && a_.client.empty() && differ.totals().requests > 0) {
      if (const int status = chartMostAffected(differ, html); status != kExitPassed) {
        return status;
      }
    }
    addNotes(differ, facts);
    if (a_.json) {
      out_ << toJson(differ, facts, a_.top).dump(2) << "\n";
    } else {
      writeText(out_, differ, facts, a_.top);
    }
    if (!a_.html.empty() && !writeHtml(html, differ, facts)) {
      return kExitError;
    }
    return gate(differ.totals(), facts);
  }

 private:
  bool failed(const std::string& message) {
    err_ << "sluice simulate: " << message << "\n";
    return false;
  }

  /// One pass over the logs: replays every line through both rule sets into `differ` (and
  /// `html` when given). Returns kExitPassed, or the status to stop with.
  int pass(Differ& differ, HtmlRecorder* html, RunFacts& facts) {
    std::vector<std::unique_ptr<LogSource>> sources;
    for (const std::string& path : a_.logs) {
      auto source = LogSource::open(path);
      if (!source) {
        failed(source.error().message);
        return kExitError;
      }
      sources.push_back(std::move(*source));
    }
    Replayer fresh({rules_});
    std::unique_ptr<Replayer> old;
    if (!baselines_.empty()) {
      old = std::make_unique<Replayer>(baselines_);
    }
    Pass run{differ, html, fresh, old.get(), {}, {}, {}};
    for (auto& source : sources) {
      if (const int status = readSource(*source, run, facts); status != kExitPassed) {
        return status;
      }
    }
    while (LoggedRequest* next = run.pending.pop(true)) {
      due(run, *next);
    }
    while (!run.due.empty()) {
      replayFirstDue(run);
    }
    facts.capacity_evictions = fresh.capacityEvictions() + (old ? old->capacityEvictions() : 0);
    return kExitPassed;
  }

  /// What one pass replays into.
  struct Pass {
    Differ& differ;
    HtmlRecorder* html;
    Replayer& fresh;
    Replayer* old;
    ReorderBuffer pending;
    DecisionRequest copy;  ///< the baseline's copy of the request (its storage reused)
    /// Lines out of the reorder buffer, in its order, not replayed yet (Replayer::kAhead
    /// at most): the new rules' replayer has prepared them.
    std::deque<LoggedRequest*> due;
  };

  /// Every line of one log: parsed (a malformed one counted, or the end under --strict),
  /// put in time order, replayed.
  int readSource(LogSource& source, Pass& run, RunFacts& facts) {
    std::string error;
    std::string_view line;
    while (source.next(line)) {
      if (++facts.lines % kAdviseEveryLines == 0) {
        heap_.advise();
      }
      if (blank(line)) {
        continue;
      }
      LoggedRequest& slot = run.pending.slot();
      bool ok = false;
      if (source.truncated()) {
        error = "longer than " + std::to_string(LogSource::kMaxLineBytes) + " bytes";
      } else {
        ok = map_ ? map_->parse(line, slot, error) : parseAccessLine(line, slot, error);
      }
      if (!ok) {
        ++facts.malformed.count;
        const std::string where =
            source.path() + ":" + std::to_string(source.lineNumber()) + ": " + error;
        if (a_.strict) {
          err_ << "sluice simulate: malformed line: " << where << "\n";
          return kExitMalformed;
        }
        if (facts.malformed.samples.size() < 10) {
          facts.malformed.samples.push_back(where);
        }
        continue;
      }
      if (slot.decision == "error") {
        ++facts.skipped_errors;  // never reached the store live: nothing to replay
        continue;
      }
      run.pending.push();
      while (LoggedRequest* next = run.pending.pop(false)) {
        due(run, *next);
      }
    }
    if (!source.error().empty()) {
      failed(source.error());
      return kExitError;
    }
    return kExitPassed;
  }

  /// A line out of the reorder buffer: the replayers prepare it (matches it and
  /// starts reading its buckets into the cache) and replays it Replayer::kAhead lines later,
  /// in the same order: the memory of the next lines is read while a line is decided.
  static void due(Pass& run, LoggedRequest& line) {
    if (run.due.size() == Replayer::kAhead) {
      replayFirstDue(run);
    }
    run.fresh.prepare(line.rules_hash, line.request);
    if (run.old != nullptr) {
      // The baseline decides a copy (Pass::copy) of the same content, as this line.
      run.old->prepare(line.rules_hash, line.request);
    }
    run.due.push_back(&line);
  }
  static void replayFirstDue(Pass& run) {
    LoggedRequest* line = run.due.front();
    run.due.pop_front();
    replay(run, *line);
    run.pending.release(line);
  }

  /// One logged request through the baseline (a copy) and the new rules: the new rules
  /// decide while the baseline's decision is still in hand, so neither is moved.
  static void replay(Pass& run, LoggedRequest& logged) {
    auto decideNew = [&run, &logged](const Decision* baseline) {
      run.fresh.decide(
          logged.time_us, logged.rules_hash, logged.request, [&](const Decision& decision) {
            run.differ.add(logged.time_us, baseline, decision, logged.decision, logged.rule);
            if (run.html != nullptr) {
              run.html->add(logged.time_us, baseline, decision);
            }
          });
    };
    if (run.old == nullptr) {
      decideNew(nullptr);
      return;
    }
    run.copy.clearForReuse();
    copyRequest(logged.request, run.copy);
    if (!run.old->decide(
            logged.time_us, logged.rules_hash, run.copy,
            [&decideNew](const Decision& baseline) { decideNew(&baseline); }, &logged.request)) {
      decideNew(nullptr);
    }
  }

  /// The client chart's default is the most affected client, known only after the first
  /// pass: one more pass over the logs records its traffic (stdin cannot be read twice).
  int chartMostAffected(const Differ& differ, HtmlRecorder& html) {
    std::string most;
    std::uint64_t best = 0;
    for (const RuleStats* rule : differ.rules()) {
      for (const auto& [who, c] : topClients(*rule, 1)) {
        const std::uint64_t change = c->denied_new > c->denied_old ? c->denied_new - c->denied_old
                                                                   : c->denied_old - c->denied_new;
        if (change > best) {
          best = change;
          most = *who;
        }
      }
    }
    const bool stdin_log = std::find(a_.logs.begin(), a_.logs.end(), "-") != a_.logs.end();
    if (most.empty() || stdin_log) {
      return kExitPassed;
    }
    html.setWho(most);
    Differ again(!baselines_.empty());
    RunFacts ignored;
    return pass(again, &html, ignored);
  }

  /// What the reader must know about how the replay differs from live.
  static void addNotes(const Differ& differ, RunFacts& facts) {
    if (facts.capacity_evictions > 0) {
      facts.notes.push_back(std::to_string(facts.capacity_evictions) +
                            " live buckets were dropped for the replay's bound of 2^26 buckets: "
                            "decisions after that may differ from live");
    }
    if (facts.skipped_errors > 0) {
      facts.notes.push_back(std::to_string(facts.skipped_errors) +
                            " lines record an error (no decision was made): not replayed");
    }
    for (const RuleStats* rule : differ.rules()) {
      if (rule->eventual) {
        facts.notes.push_back("rule " + rule->name +
                              ": eventual consistency replayed as strict (what the memory store "
                              "decides; live sidecars admit a little more between syncs)");
      }
      if (rule->sketch) {
        facts.notes.push_back("rule " + rule->name +
                              ": sketch, replayed with its own estimation error (docs/sketch.md)");
      }
    }
  }

  bool writeHtml(HtmlRecorder& html, const Differ& differ, const RunFacts& facts) {
    std::ofstream file(a_.html, std::ios::binary | std::ios::trunc);
    if (file) {
      file << html.render(differ, facts.malformed.count, facts.notes, a_.top);
    }
    if (!file || !file.flush()) {
      return failed("--html " + a_.html + ": cannot write");
    }
    return true;
  }

  /// The exit status: an empty log, then the gates of --fail-if-newly-denied*.
  int gate(const Totals& totals, const RunFacts& facts) {
    if (totals.requests == 0) {
      err_ << "sluice simulate: the log has no request to replay"
           << (facts.malformed.count > 0 ? " (every line was malformed)" : "") << "\n";
      return kExitEmptyLog;
    }
    if (a_.fail_requests_pct &&
        ratio(totals.newly_denied, totals.requests) > *a_.fail_requests_pct) {
      err_ << "sluice simulate: " << percent(totals.newly_denied, totals.requests)
           << " of the requests would newly be denied (more than " << *a_.fail_requests_pct
           << " %)\n";
      return kExitNewlyDenied;
    }
    if (a_.fail_clients_pct &&
        ratio(totals.clients_newly_denied, totals.clients) > *a_.fail_clients_pct) {
      err_ << "sluice simulate: " << percent(totals.clients_newly_denied, totals.clients)
           << " of the clients would newly be denied (more than " << *a_.fail_clients_pct
           << " %)\n";
      return kExitClientsDenied;
    }
    return kExitPassed;
  }

  /// Lines read between two looks at the heap's growth (HugePageHeap::advise()).
  static constexpr std::uint64_t kAdviseEveryLines = 1024;

  const Arguments& a_;
  std::ostream& out_;
  std::ostream& err_;
  HugePageHeap heap_;
  RuleSetPtr rules_;
  std::vector<RuleSetPtr> baselines_;
  std::unique_ptr<LogMap> map_;
};

}  // namespace

int runSimulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = parseArguments(args);
  if (!parsed) {
    err << "sluice simulate: " << parsed.error().message << "\n";
    return kExitError;
  }
  if (parsed->help) {
    out << simulateHelp();
    return kExitPassed;
  }
  Simulation simulation(*parsed, out, err);
  if (!simulation.load()) {
    return kExitError;
  }
  return simulation.run();
}

}  // namespace sluice::simulate
