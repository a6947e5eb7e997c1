#include "simulate/html_report.hpp"

#include <algorithm>
#include <cstdio>

#include "sluice/simulate/access_record.hpp"

namespace sluice::simulate {
namespace {

void appendHtml(std::string& out, std::string_view text) {
  for (char ch : text) {
    switch (ch) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
}

std::string html(std::string_view text) {
  std::string out;
  appendHtml(out, text);
  return out;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

std::string clockText(Micros t) {
  std::string full;
  appendRfc3339Micros(full, t);
  return full.substr(11, 8);  // hh:mm:ss
}

struct Line {
  std::string name;
  std::string css_class;
  const TimeSeries* series;
  /// > 0: plot a rate per this window (count x window / bucket width); 0: plot counts.
  double rate_window_us = 0;
};

constexpr int kChartWidth = 760;
constexpr int kChartHeight = 240;
constexpr int kChartLeft = 60;
constexpr int kChartRight = 40;
constexpr int kChartTop = 28;
constexpr int kChartBottom = 36;

/// The chart's common time axis and value scale, and where a point is drawn.
struct ChartScale {
  Micros start = 0;
  Micros width = kMicrosPerSecond;  ///< one point per `width`
  std::size_t points = 1;
  bool any = false;  ///< some series has data
  double max_value = 1;

  double x(std::size_t i) const {
    const double plot_w = kChartWidth - kChartLeft - kChartRight;
    return kChartLeft +
           (points <= 1 ? 0.0 : plot_w * static_cast<double>(i) / static_cast<double>(points - 1));
  }
  double y(double v) const {
    const double plot_h = kChartHeight - kChartTop - kChartBottom;
    return kChartTop + plot_h - plot_h * v / max_value;
  }
};

/// The widest bucket width among the series, doubled until the points fit.
ChartScale commonAxis(const std::vector<Line>& lines) {
  ChartScale scale;
  Micros end = 0;
  for (const Line& line : lines) {
    const TimeSeries& s = *line.series;
    if (s.counts().empty()) {
      continue;
    }
    const Micros s_end = s.start() + static_cast<Micros>(s.counts().size()) * s.width();
    scale.start = scale.any ? std::min(scale.start, s.start()) : s.start();
    end = scale.any ? std::max(end, s_end) : s_end;
    scale.width = scale.any ? std::max(scale.width, s.width()) : s.width();
    scale.any = true;
  }
  if (scale.any) {
    while ((end - scale.start) / scale.width > static_cast<Micros>(TimeSeries::kMaxPoints)) {
      scale.width *= 2;
    }
    scale.start -= scale.start % scale.width;
    scale.points = static_cast<std::size_t>((end - scale.start + scale.width - 1) / scale.width);
    scale.points = std::max<std::size_t>(scale.points, 1);
  }
  return scale;
}

/// Each series re-bucketed onto the axis (as a rate per its window when it has one); sets
/// the scale's maximum (at least the limit, with a tenth of headroom).
std::vector<std::vector<double>> rebucket(const std::vector<Line>& lines, double limit,
                                          ChartScale& scale) {
  std::vector<std::vector<double>> values;
  double max_value = limit;
  for (const Line& line : lines) {
    TimeSeries copy = *line.series;
    std::vector<double> v(scale.points, 0.0);
    if (scale.any && !copy.counts().empty()) {
      Micros w = copy.width();
      while (w < scale.width) {
        w *= 2;
      }
      copy.alignTo(scale.start, w);
      const double factor =
          line.rate_window_us > 0 ? line.rate_window_us / static_cast<double>(w) : 1.0;
      for (std::size_t i = 0; i < copy.counts().size() && i < scale.points; ++i) {
        v[i] = static_cast<double>(copy.counts()[i]) * factor;
      }
    }
    for (double x : v) {
      max_value = std::max(max_value, x);
    }
    values.push_back(std::move(v));
  }
  scale.max_value = (max_value <= 0 ? 1 : max_value) * 1.1;
  return values;
}

/// Axes and grid: four horizontal lines, five time labels, the y label, the limit line.
void appendAxes(std::string& out, const ChartScale& scale, double limit,
                const std::string& y_label) {
  for (int g = 0; g <= 4; ++g) {
    const double v = scale.max_value * g / 4.0;
    const double y = scale.y(v);
    out += "<line class=\"grid\" x1=\"" + std::to_string(kChartLeft) + "\" x2=\"" +
           std::to_string(kChartWidth - kChartRight) + "\" y1=\"" + number(y) + "\" y2=\"" +
           number(y) + "\"/><text class=\"yl\" x=\"" + std::to_string(kChartLeft - 6) + "\" y=\"" +
           number(y + 4) + "\">" + number(v) + "</text>";
  }
  if (scale.any) {
    for (int g = 0; g <= 4; ++g) {
      const auto i = static_cast<std::size_t>((scale.points - 1) * g / 4);
      out += "<text class=\"xl\" x=\"" + number(scale.x(i)) + "\" y=\"" +
             std::to_string(kChartHeight - kChartBottom + 16) + "\">" +
             clockText(scale.start + static_cast<Micros>(i) * scale.width) + "</text>";
    }
  }
  out += "<text class=\"yl\" x=\"" + std::to_string(kChartLeft) + "\" y=\"" +
         std::to_string(kChartHeight - 4) + "\" style=\"text-anchor:start\">" + html(y_label) +
         " (UTC; one point per " + number(static_cast<double>(scale.width) / kMicrosPerSecond) +
         " s)</text>";
  if (limit > 0) {
    out += "<line class=\"limit\" x1=\"" + std::to_string(kChartLeft) + "\" x2=\"" +
           std::to_string(kChartWidth - kChartRight) + "\" y1=\"" + number(scale.y(limit)) +
           "\" y2=\"" + number(scale.y(limit)) + "\"/>";
  }
}

/// The series' paths, then the legend.
void appendSeries(std::string& out, const ChartScale& scale, const std::vector<Line>& lines,
                  const std::vector<std::vector<double>>& values, double limit) {
  for (std::size_t l = 0; l < lines.size(); ++l) {
    std::string d;
    for (std::size_t i = 0; i < values[l].size(); ++i) {
      d += (i == 0 ? "M" : "L") + number(scale.x(i)) + " " + number(scale.y(values[l][i]));
    }
    if (values[l].size() == 1) {
      d += "L" + number(scale.x(0) + 4) + " " + number(scale.y(values[l][0]));
    }
    out += "<path class=\"series " + lines[l].css_class + "\" d=\"" + d + "\"><title>" +
           html(lines[l].name) + "</title></path>";
  }
  double x = kChartLeft + 260;
  for (const Line& line : lines) {
    out += "<rect class=\"" + line.css_class + "-key\" x=\"" + number(x) +
           "\" y=\"8\" width=\"12\" height=\"4\"/><text class=\"lg\" x=\"" + number(x + 16) +
           "\" y=\"14\">" + html(line.name) + "</text>";
    x += 24 + 7.0 * static_cast<double>(line.name.size());
  }
  if (limit > 0) {
    out += "<rect class=\"limit-key\" x=\"" + number(x) +
           "\" y=\"8\" width=\"12\" height=\"4\"/><text class=\"lg\" x=\"" + number(x + 16) +
           "\" y=\"14\">limit</text>";
  }
}

/// A line chart in SVG over a common time axis: every series is re-bucketed to the widest
/// bucket width among them. `limit` > 0 draws a horizontal limit line.
std::string svgChart(const std::string& id, const std::string& title, std::vector<Line> lines,
                     double limit, const std::string& y_label) {
  ChartScale scale = commonAxis(lines);
  const std::vector<std::vector<double>> values = rebucket(lines, limit, scale);
  std::string out;
  out += "<figure class=\"chart\"><svg id=\"" + html(id) + "\" class=\"chart-svg\" width=\"" +
         std::to_string(kChartWidth) + "\" height=\"" + std::to_string(kChartHeight) +
         "\" viewBox=\"0 0 " + std::to_string(kChartWidth) + " " + std::to_string(kChartHeight) +
         "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>" + html(title) + "</title>";
  out += "<text class=\"t\" x=\"" + std::to_string(kChartLeft) + "\" y=\"16\">" + html(title) +
         "</text>";
  appendAxes(out, scale, limit, y_label);
  appendSeries(out, scale, lines, values, limit);
  out += "</svg></figure>\n";
  return out;
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:820px;color:#1d2733;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #d6dde5;padding-bottom:3px}
.summary{background:#f3f6f9;border:1px solid #d6dde5;border-radius:6px;padding:10px 14px}
.bad{color:#b3261e;font-weight:600}.good{color:#1e6b34;font-weight:600}.muted{color:#5b6773}
.chart{margin:8px 0}.chart-svg{background:#fff;border:1px solid #e1e6eb;border-radius:4px}
.grid{stroke:#e7ebef}.t{font-weight:600;font-size:13px;fill:#1d2733}.xl{font-size:11px;fill:#5b6773;text-anchor:middle}
.yl{font-size:11px;fill:#5b6773;text-anchor:end}.lg{font-size:11px;fill:#1d2733}
.series{fill:none;stroke-width:2}.old{stroke:#7a8896}.new{stroke:#c2410c}.rate{stroke:#1d4ed8}
.old-key{fill:#7a8896}.new-key{fill:#c2410c}.rate-key{fill:#1d4ed8}.limit-key{fill:#b3261e}
.limit{stroke:#b3261e;stroke-dasharray:6 4;stroke-width:1.5}
table{border-collapse:collapse;width:100%;margin-top:6px}th,td{border-bottom:1px solid #e1e6eb;padding:4px 8px;text-align:left}
th{cursor:pointer;background:#f3f6f9;user-select:none}th:after{content:" \2195";color:#9aa5b1}td.n{text-align:right;font-variant-numeric:tabular-nums}
ul.notes{padding-left:18px}code{background:#f3f6f9;padding:0 3px;border-radius:3px}
)";

constexpr const char* kScript = R"(
document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th,col){
    th.addEventListener('click',function(){
      var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
      var asc=th.getAttribute('data-dir')!=='asc';
      table.querySelectorAll('th').forEach(function(h){h.removeAttribute('data-dir');});
      th.setAttribute('data-dir',asc?'asc':'desc');
      rows.sort(function(a,b){
        var x=a.cells[col].getAttribute('data-v')||a.cells[col].textContent;
        var y=b.cells[col].getAttribute('data-v')||b.cells[col].textContent;
        var nx=parseFloat(x),ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
)";

std::string withPercent(std::uint64_t part, std::uint64_t whole) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu (%.2f %%)", static_cast<unsigned long long>(part),
                whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

}  // namespace

void HtmlRecorder::record(Micros at, const Decision& decision, bool is_new) {
  const DecisionRequest& request = decision.request;
  for (std::size_t d = 0; d < decision.descriptors.size(); ++d) {
    Differ::identity(decision, d, scratch_);
    if (scratch_ != who_) {
      continue;
    }
    for (const LimitStatus& limit : decision.descriptors[d].limits) {
      if (limit.rule == nullptr || limit.from_request || limit.unlimited) {
        continue;
      }
      ClientSeries& series = rules_[request.domain + "\n" + limit.name];
      std::int64_t hits = request.hits;
      if (d < request.descriptor_hits.size() && request.descriptor_hits[d]) {
        hits = *request.descriptor_hits[d];
      }
      (is_new ? series.hits_new : series.hits_old).add(at, static_cast<std::uint64_t>(hits));
      if (!limit.outcome.allowed) {
        (is_new ? series.denied_new : series.denied_old).add(at, 1);
      }
    }
  }
}

void HtmlRecorder::add(Micros at, const Decision* old_decision, const Decision& new_decision) {
  if (who_.empty()) {
    return;
  }
  if (old_decision != nullptr) {
    record(at, *old_decision, false);
  }
  record(at, new_decision, true);
}

namespace {

/// The time span, the totals and the notes.
void appendSummary(std::string& out, const Differ& differ, std::uint64_t malformed,
                   const std::vector<std::string>& notes) {
  const Totals& t = differ.totals();
  out += "<p class=\"muted\">";
  if (t.requests > 0) {
    std::string first;
    std::string last;
    appendRfc3339Micros(first, t.first_us);
    appendRfc3339Micros(last, t.last_us);
    out += html(first) + " .. " + html(last);
  }
  out += differ.hasBaseline() ? "" : " &middot; no baseline: the baseline denies nothing";
  out += "</p>\n<div class=\"summary\" id=\"summary\">";
  out += "<p><b>" + std::to_string(t.requests) +
         "</b> requests replayed. Newly denied: <span class=\"" +
         std::string(t.newly_denied > 0 ? "bad" : "good") + "\">" +
         withPercent(t.newly_denied, t.requests) + "</span> requests, <span class=\"" +
         std::string(t.clients_newly_denied > 0 ? "bad" : "good") + "\">" +
         withPercent(t.clients_newly_denied, t.clients) + "</span> of " +
         std::to_string(t.clients) +
         " clients. No longer denied: " + withPercent(t.no_longer_denied, t.requests) +
         " requests, " + std::to_string(t.clients_no_longer_denied) + " clients.</p>";
  out += "<p>Denied under the baseline: " + withPercent(t.denied_old, t.requests) +
         "; under the new rules: " + withPercent(t.denied_new, t.requests) + ".</p>";
  if (t.compared > 0) {
    out +=
        "<p>Recorded decisions reproduced by the baseline: " + withPercent(t.agreed, t.compared) +
        ".</p>";
  }
  if (malformed > 0) {
    out += "<p class=\"bad\">" + std::to_string(malformed) + " malformed lines skipped.</p>";
  }
  if (!notes.empty()) {
    out += "<ul class=\"notes\">";
    for (const std::string& note : notes) {
      out += "<li>" + html(note) + "</li>";
    }
    out += "</ul>";
  }
  out += "</div>\n";
}

/// The client chart: who's rule with the largest change in denials, its rate against the
/// limit and its denials.
template <typename SeriesByRule>
void appendClientCharts(std::string& out, const Differ& differ, const std::string& who,
                        const SeriesByRule& series_by_rule) {
  const RuleStats* client_rule = nullptr;
  const typename SeriesByRule::mapped_type* client_series = nullptr;
  std::uint64_t best = 0;
  for (const RuleStats* rule : differ.rules()) {
    const auto* found = rule->clients.find(who);
    auto series = series_by_rule.find(rule->domain + "\n" + rule->name);
    if (found == nullptr || series == series_by_rule.end()) {
      continue;
    }
    const ClientStats& c = found->second;
    const std::uint64_t change =
        c.denied_new > c.denied_old ? c.denied_new - c.denied_old : c.denied_old - c.denied_new;
    if (client_rule == nullptr || change > best) {
      client_rule = rule;
      client_series = &series->second;
      best = change;
    }
  }
  if (client_rule != nullptr) {
    out +=
        "<h2 id=\"client\">Client " + html(who) + " under " + html(client_rule->name) + "</h2>\n";
    const TimeSeries& hits = client_series->hits_new.counts().empty() ? client_series->hits_old
                                                                      : client_series->hits_new;
    // Requests per bucket, scaled to requests per the rule's window: count * window / width.
    Line rate{"requests per " + client_rule->window_name, "rate", &hits,
              static_cast<double>(client_rule->window_us)};
    out += svgChart("chart-client", html(who) + ": rate vs limit", {rate},
                    static_cast<double>(client_rule->limit_value),
                    "requests per " + client_rule->window_name);
    out += svgChart("chart-client-denials", html(who) + ": denied requests",
                    {Line{"baseline", "old", &client_series->denied_old},
                     Line{"new rules", "new", &client_series->denied_new}},
                    0, "denied requests per point");
  }
}

/// Each rule's limits, counts and denials over time.
void appendRuleCharts(std::string& out, const Differ& differ) {
  out += "<h2>Rules</h2>\n";
  int index = 0;
  for (const RuleStats* rule : differ.rules()) {
    out += "<h3>" + html(rule->name) + " <span class=\"muted\">(" + html(rule->domain) +
           ")</span></h3>\n<p>baseline: " + html(rule->limit_old.empty() ? "-" : rule->limit_old) +
           "<br>new: " + html(rule->limit_new.empty() ? "-" : rule->limit_new) + "<br>matched " +
           std::to_string(rule->matched) + ", denied " + std::to_string(rule->denied_old) +
           " &rarr; " + std::to_string(rule->denied_new) + "; clients newly denied " +
           std::to_string(rule->clientsNewlyDenied()) + ", no longer denied " +
           std::to_string(rule->clientsNoLongerDenied()) + "</p>\n";
    out += svgChart(
        "chart-rule-" + std::to_string(index++), "denials over time: " + rule->name,
        {Line{"baseline", "old", &rule->series_old}, Line{"new rules", "new", &rule->series_new}},
        0, "denied requests per point");
  }
}

/// The newly denied clients' table (its closing tags are the caller's).
void appendNewlyDenied(std::string& out, const Differ& differ, std::size_t top) {
  out +=
      "<h2>Newly denied clients</h2>\n<table class=\"sortable\" id=\"newly-denied\"><thead>"
      "<tr><th>client</th><th>rule</th><th>requests</th><th>denied (baseline)</th>"
      "<th>denied (new)</th><th>newly denied</th><th>peak per "
      "window</th><th>limit</th></tr></thead><tbody>";
  for (const RuleStats* rule : differ.rules()) {
    std::vector<std::pair<const std::string*, const ClientStats*>> rows;
    for (const auto& [who, c] : rule->clients) {
      if (c.newly_denied > 0) {
        rows.emplace_back(&who, &c);
      }
    }
    const std::size_t keep = std::min(rows.size(), top * 10);
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(),
                      [](const auto& a, const auto& b) {
                        // Most newly denied first; ties by name, whatever the table's order.
                        return a.second->newly_denied != b.second->newly_denied
                                   ? a.second->newly_denied > b.second->newly_denied
                                   : *a.first < *b.first;
                      });
    rows.resize(keep);
    for (const auto& [who, c] : rows) {
      out += "<tr><td>" + html(who->empty() ? "\"\"" : *who) + "</td><td>" + html(rule->name) +
             "</td><td class=\"n\">" + std::to_string(c->matched) + "</td><td class=\"n\">" +
             std::to_string(c->denied_old) + "</td><td class=\"n\">" +
             std::to_string(c->denied_new) + "</td><td class=\"n\">" +
             std::to_string(c->newly_denied) + "</td><td class=\"n\">" + std::to_string(c->peak) +
             " / " + html(rule->window_name) + "</td><td class=\"n\">" +
             std::to_string(rule->limit_value) + "</td></tr>";
    }
  }
}

}  // namespace

std::string HtmlRecorder::render(const Differ& differ, std::uint64_t malformed,
                                 const std::vector<std::string>& notes, std::size_t top) const {
  std::string out;
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>Sluice what-if report</title><style>";
  out += kStyle;
  out += "</style></head><body>\n<h1>What if: the new rules against recorded traffic</h1>\n";
  appendSummary(out, differ, malformed, notes);
  appendClientCharts(out, differ, who_, rules_);
  appendRuleCharts(out, differ);
  appendNewlyDenied(out, differ, top);
  out +=
      "</tbody></table>\n<p class=\"muted\">Made by <code>sluice simulate</code>. Click a "
      "column to sort.</p>\n<script>";
  out += kScript;
  out += "</script></body></html>\n";
  return out;
}

}  // namespace sluice::simulate
