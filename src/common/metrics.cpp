#include "sluice/common/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace sluice {
namespace {

std::string fullName(std::string_view name) {
  if (name.starts_with("sluice_")) {
    return std::string(name);
  }
  return "sluice_" + std::string(name);
}

/// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
/// forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one.
std::size_t utf8SequenceLength(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : 0x80;
    high = lead == 0xED ? 0x9F : 0xBF;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : 0x80;
    high = lead == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) {
      return 0;
    }
  }
  return length;
}

/// Label values and HELP texts: backslash and newline escaped (and '"' in label values).
/// Prometheus refuses a whole scrape whose text is not UTF-8, and forward-auth descriptor
/// values are raw header bytes, so every ill-formed byte becomes U+FFFD.
void appendEscaped(std::string& out, std::string_view value, bool quote) {
  std::size_t i = 0;
  while (i < value.size()) {
    const char ch = value[i];
    const std::size_t length = utf8SequenceLength(value.substr(i));
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (length > 1) {
      out.append(value.substr(i, length));
      i += length;
      continue;
    }
    ++i;
    switch (ch) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += quote ? "\\\"" : "\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += ch;
    }
  }
}

/// A sample value: integers without a fraction, others in the shortest form that reads
/// back as the same double, and the exposition's spellings of the non-finite values.
std::string formatNumber(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  if (std::isinf(v)) {
    return v > 0 ? "+Inf" : "-Inf";
  }
  char buf[64];
  if (v < 1e15 && v > -1e15 && v == static_cast<double>(static_cast<std::int64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    return std::string(buf, end);
  }
  return buf;
}

// Adds an extra label inside an already rendered label set.
std::string withLabel(const std::string& rendered, std::string_view key, std::string_view value) {
  std::string extra = std::string(key) + "=\"" + std::string(value) + "\"";
  if (rendered.empty()) {
    return "{" + extra + "}";
  }
  return rendered.substr(0, rendered.size() - 1) + "," + extra + "}";
}

}  // namespace

void Gauge::add(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double v) {
  // The first bound not below `v` (std::lower_bound's), found from the smallest: the bounds
  // are few and most observations (a decision's latency) fall in the first ones.
  std::size_t bucket = 0;
  while (bucket < bounds_.size() && bounds_[bucket] < v) {
    ++bucket;
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double cur = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::vector<std::uint64_t> Histogram::cumulativeCounts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

double Histogram::sum() const { return sum_.load(std::memory_order_relaxed); }
std::uint64_t Histogram::count() const { return count_.load(std::memory_order_relaxed); }

std::vector<double> latencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1.0};
}

std::string renderLabels(const Labels& labels) {
  if (labels.empty()) {
    return {};
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) {
      out += ',';
    }
    first = false;
    out += k;
    out += "=\"";
    appendEscaped(out, v, true);
    out += '"';
  }
  out += '}';
  return out;
}

void Metrics::describe(std::string_view name, Type type, std::string_view help,
                       std::vector<double> buckets) {
  std::unique_lock lock(mutex_);
  auto& fam = families_[fullName(name)];
  fam.type = type;
  fam.help = std::string(help);
  if (!buckets.empty()) {
    fam.buckets = std::move(buckets);
  }
}

Metrics::Family& Metrics::family(std::string_view name, Type type) {
  auto& fam = families_[fullName(name)];
  if (fam.help.empty() && fam.counters.empty() && fam.gauges.empty() && fam.histograms.empty()) {
    fam.type = type;
  }
  return fam;
}

template <typename T, typename Make>
T& Metrics::series(std::string_view name, Type type, const Labels& labels,
                   std::map<std::string, std::unique_ptr<T>> Family::*member, Make make) {
  std::string key = renderLabels(labels);
  {
    std::shared_lock lock(mutex_);
    auto fam = families_.find(fullName(name));
    if (fam != families_.end()) {
      auto& map = fam->second.*member;
      auto it = map.find(key);
      if (it != map.end()) {
        return *it->second;
      }
    }
  }
  std::unique_lock lock(mutex_);
  Family& fam = family(name, type);
  auto& slot = (fam.*member)[key];
  if (!slot) {
    slot = make(fam);
  }
  return *slot;
}

Counter& Metrics::counter(std::string_view name, const Labels& labels) {
  return series(name, Type::kCounter, labels, &Family::counters,
                [](const Family&) { return std::make_unique<Counter>(); });
}

Gauge& Metrics::gauge(std::string_view name, const Labels& labels) {
  return series(name, Type::kGauge, labels, &Family::gauges,
                [](const Family&) { return std::make_unique<Gauge>(); });
}

Histogram& Metrics::histogram(std::string_view name, const Labels& labels) {
  return series(name, Type::kHistogram, labels, &Family::histograms, [](const Family& fam) {
    return std::make_unique<Histogram>(fam.buckets.empty() ? latencyBuckets() : fam.buckets);
  });
}

std::string Metrics::render() const {
  std::shared_lock lock(mutex_);
  std::ostringstream out;
  for (const auto& [name, fam] : families_) {
    const char* type = fam.type == Type::kCounter ? "counter"
                       : fam.type == Type::kGauge ? "gauge"
                                                  : "histogram";
    std::string help;
    appendEscaped(help, fam.help.empty() ? std::string_view(name) : std::string_view(fam.help),
                  false);
    out << "# HELP " << name << ' ' << help << '\n';
    out << "# TYPE " << name << ' ' << type << '\n';
    for (const auto& [labels, c] : fam.counters) {
      out << name << labels << ' ' << c->value() << '\n';
    }
    for (const auto& [labels, g] : fam.gauges) {
      out << name << labels << ' ' << formatNumber(g->value()) << '\n';
    }
    for (const auto& [labels, h] : fam.histograms) {
      auto counts = h->cumulativeCounts();
      for (std::size_t i = 0; i < h->bounds().size(); ++i) {
        out << name << "_bucket" << withLabel(labels, "le", formatNumber(h->bounds()[i])) << ' '
            << counts[i] << '\n';
      }
      out << name << "_bucket" << withLabel(labels, "le", "+Inf") << ' ' << counts.back() << '\n';
      out << name << "_sum" << labels << ' ' << formatNumber(h->sum()) << '\n';
      out << name << "_count" << labels << ' ' << h->count() << '\n';
    }
  }
  return out.str();
}

}  // namespace sluice
