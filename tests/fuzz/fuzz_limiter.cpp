// The limiter on everything a valid rules file and a request can give it
// (sluice::evaluate, src/limiter/): L up to 2^32-1, windows, full buckets, min_interval and
// warmup up to kMaxRuleSpanMicros (the loader's bounds), costs up to kMaxHits, and a
// run of requests over time. Checks the contract of include/sluice/limiter/limiter.hpp; UBSan
// catches overflow in the arithmetic.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "fuzz_check.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"

namespace {

constexpr std::int64_t kMaxCount = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMaxHits = 1'000'000'000;  // sluice::kMaxHits (sluice/decision/request_shape.hpp)
constexpr int kMaxSteps = 48;
/// 2128: later instants are not worth a finding.
constexpr sluice::Micros kLatest = 5'000'000'000'000'000;
constexpr sluice::Micros kMaxWait = 100LL * 365 * 86'400 * 1'000'000;

sluice::LimitParams consumeParams(FuzzedDataProvider& in) {
  sluice::LimitParams params;
  params.algorithm =
      in.PickValueInArray({sluice::Algorithm::kFixedWindow, sluice::Algorithm::kSlidingWindowLog,
                           sluice::Algorithm::kSlidingWindowCounter,
                           sluice::Algorithm::kTokenBucket, sluice::Algorithm::kLeakyBucket});
  params.limit = in.ConsumeIntegralInRange<std::int64_t>(0, kMaxCount);
  const sluice::TimeUnit unit =
      in.PickValueInArray({sluice::TimeUnit::kSecond, sluice::TimeUnit::kMinute,
                           sluice::TimeUnit::kHour, sluice::TimeUnit::kDay, sluice::TimeUnit::kWeek,
                           sluice::TimeUnit::kMonth, sluice::TimeUnit::kYear});
  const sluice::Micros unit_us = sluice::unitMicros(unit);
  // The loader accepts 1..kMaxCount as long as the window is at most kMaxRuleSpanMicros.
  const std::int64_t max_multiplier = sluice::kMaxRuleSpanMicros / unit_us;
  params.window_us = unit_us * in.ConsumeIntegralInRange<std::int64_t>(1, max_multiplier);
  switch (params.algorithm) {
    case sluice::Algorithm::kTokenBucket:
    case sluice::Algorithm::kLeakyBucket:
      params.burst = params.limit;
      if (in.ConsumeBool() && params.limit > 0) {
        // burst x W / L <= kMaxRuleSpanMicros
        const auto most = static_cast<std::int64_t>(
            static_cast<double>(sluice::kMaxRuleSpanMicros) * static_cast<double>(params.limit) /
            static_cast<double>(params.window_us));
        params.burst = in.ConsumeIntegralInRange<std::int64_t>(
            1, std::clamp<std::int64_t>(most, 1, kMaxCount));
      }
      if (params.algorithm == sluice::Algorithm::kLeakyBucket) {
        params.shape = in.ConsumeBool();
      } else if (in.ConsumeBool()) {
        params.warmup_us = in.ConsumeIntegralInRange<sluice::Micros>(0, sluice::kMaxRuleSpanMicros);
      }
      break;
    case sluice::Algorithm::kSlidingWindowLog:
      if (in.ConsumeBool()) {
        params.min_interval_us =
            in.ConsumeIntegralInRange<sluice::Micros>(0, sluice::kMaxRuleSpanMicros);
      }
      params.count_rejected = in.ConsumeBool();
      break;
    default:
      params.count_rejected = in.ConsumeBool();
      break;
  }
  return params;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const sluice::LimitParams params = consumeParams(in);
  // Unix time in microseconds, from 2001 to 2096 (the Redis store's clock is TIME).
  sluice::Micros now =
      in.ConsumeIntegralInRange<sluice::Micros>(1'000'000'000'000'000, 4'000'000'000'000'000);
  sluice::BucketState state;
  for (int step = 0; step < kMaxSteps && in.remaining_bytes() > 0 && now < kLatest; ++step) {
    const std::int64_t cost = in.ConsumeBool()
                                  ? in.ConsumeIntegralInRange<std::int64_t>(0, 3)
                                  : in.ConsumeIntegralInRange<std::int64_t>(0, kMaxHits);
    const sluice::Evaluation e = sluice::evaluate(params, state, now, cost);
    const sluice::Outcome& o = e.outcome;
    SLUICE_FUZZ_CHECK(o.remaining >= 0);
    SLUICE_FUZZ_CHECK(o.reset_after_us >= 0);
    SLUICE_FUZZ_CHECK(o.delay_us >= 0);
    SLUICE_FUZZ_CHECK(e.ttl_us >= 0);
    if (o.allowed) {
      SLUICE_FUZZ_CHECK(o.retry_after_us == 0 && !o.never);
    } else if (o.never) {
      SLUICE_FUZZ_CHECK(o.retry_after_us == sluice::kRetryNever);
    } else {
      SLUICE_FUZZ_CHECK(o.retry_after_us > 0);
    }
    if (o.allowed || params.count_rejected) {
      state = e.next;
    }
    // The next request comes soon, within the window, or much later.
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
        now += in.ConsumeIntegralInRange<sluice::Micros>(0, 1000);
        break;
      case 1:
        now += in.ConsumeIntegralInRange<sluice::Micros>(0, 10'000'000);
        break;
      case 2:
        // retry_after is exact: the same request passes then (within a century of waiting).
        if (!o.allowed && !o.never && o.retry_after_us <= kMaxWait) {
          now += o.retry_after_us;
          SLUICE_FUZZ_CHECK(sluice::evaluate(params, e.next, now, cost).outcome.allowed);
        }
        break;
      default:
        now += in.ConsumeIntegralInRange<sluice::Micros>(0, 1'000'000'000'000);
        break;
    }
  }
  return 0;
}
