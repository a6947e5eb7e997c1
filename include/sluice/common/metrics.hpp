#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// A small Prometheus registry. Metric handles are created once and cached by callers on
/// hot paths (a lookup takes a shared lock; an increment is one relaxed atomic add).
namespace sluice {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(std::uint64_t by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Cumulative histogram with fixed upper bounds (seconds for latencies).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  /// Cumulative counts per bound, then +Inf; sum.
  std::vector<std::uint64_t> cumulativeCounts() const;
  double sum() const;
  std::uint64_t count() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // bounds_.size() + 1 buckets
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

/// Default latency buckets in seconds: 50us .. 1s.
std::vector<double> latencyBuckets();

class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  /// Declares a family (name without the sluice_ prefix is fine; it is added on output if
  /// missing). Re-declaring is harmless. Thread-safe.
  void describe(std::string_view name, Type type, std::string_view help,
                std::vector<double> buckets = {});

  /// Finds or creates one series. The returned reference lives as long as the registry.
  Counter& counter(std::string_view name, const Labels& labels = {});
  Gauge& gauge(std::string_view name, const Labels& labels = {});
  Histogram& histogram(std::string_view name, const Labels& labels = {});

  /// The Prometheus text exposition format (version 0.0.4).
  std::string render() const;

 private:
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // key: rendered labels
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(std::string_view name, Type type);
  /// Finds the series `labels` of family `name` in `Family::*series` under a shared lock,
  /// else creates it (with `make`) under the exclusive lock.
  template <typename T, typename Make>
  T& series(std::string_view name, Type type, const Labels& labels,
            std::map<std::string, std::unique_ptr<T>> Family::*member, Make make);

  mutable std::shared_mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
};

/// Renders labels as `{a="x",b="y"}` with Prometheus escaping ("" for none).
std::string renderLabels(const Labels& labels);

}  // namespace sluice
