// The memory store's snapshot file read back at start-up, then decided on: the reader's
// framing (magic, version, blocks, checksums, records), the restore (expiry, limits gone,
// capacity) and the decisions that follow on whatever states the file held.
//
// Two shapes of input, by the first byte:
//  - even: the rest is a snapshot file's bytes, read as they are (most are refused by the
//    framing or a checksum: the refusal must be an error, never a crash);
//  - odd: the rest describes records; the harness writes them as a well-formed file (right
//    checksums) for the buckets the rules really have, so that hostile bucket states
//    (negative counts, times far in the past or the future, logs of any length) reach the
//    restore and the algorithms.
// After a restore every rule's bucket is decided a few times on a clock that moves: the
// answers must stay within the limits' bounds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/manual_executor.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_snapshot.hpp"
#include "sluice/store/memory_store.hpp"
#include "store/memory/snapshot_format.hpp"

namespace {

using sluice::Micros;

// Every algorithm the memory store snapshots, each under its own descriptor key.
constexpr const char* kRules = R"(domain: fuzz
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 4, algorithm: sliding_window_log,
                 min_interval: 1s}
  - key: counter
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_window_counter}
  - key: token
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: leaky
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: leaky_bucket, burst: 5}
  - key: rejected
    rate_limit: {unit: hour, requests_per_unit: 2, count_rejected: true}
  - key: monthly
    rate_limit:
      unit: month
      requests_per_unit: 9
      calendar: {time_zone: Europe/Paris}
)";

constexpr const char* kKeys[] = {"fixed", "log",      "counter", "token",
                                 "leaky", "rejected", "monthly"};
constexpr std::int64_t kLimits[] = {5, 4, 10, 20, 5, 2, 9};
constexpr Micros kStart = 1'790'000'000'000'000;  // 2026-09-21, a fixed start

struct Sidecar {
  explicit Sidecar(const sluice::RuleSetPtr& rules) : rules(rules) {
    clock.set(kStart);
    sluice::MemoryStoreOptions options;
    options.max_keys = 64;
    store = sluice::makeMemoryStore(options, clock, metrics);
    sluice::DecisionServiceParts parts;
    parts.rules = [this] { return this->rules; };
    parts.store = store;
    parts.clock = &clock;
    service = sluice::makeDecisionService(std::move(parts));
  }

  /// One decision on rule `index`'s bucket; checks the answer against the limit.
  void decide(std::size_t index, std::int64_t hits) {
    sluice::DecisionRequest request;
    request.domain = "fuzz";
    request.client_id = "c";
    request.descriptors = {{sluice::Entry{kKeys[index], "v"}}};
    request.hits = hits;
    bool answered = false;
    service->decide(std::move(request), [&](sluice::Result<sluice::Decision> decision) {
      answered = true;
      SLUICE_FUZZ_CHECK(decision.ok());
      const sluice::Outcome& outcome = decision->descriptors.at(0).limits.at(0).outcome;
      SLUICE_FUZZ_CHECK(outcome.remaining >= 0 && outcome.remaining <= kLimits[index]);
      SLUICE_FUZZ_CHECK(outcome.reset_after_us >= 0);
      SLUICE_FUZZ_CHECK(outcome.retry_after_us >= 0 ||
                        outcome.retry_after_us == sluice::kRetryNever);
      SLUICE_FUZZ_CHECK(!outcome.allowed || outcome.retry_after_us == 0);
    });
    SLUICE_FUZZ_CHECK(answered);  // the memory store answers inline
  }

  sluice::ManualClock clock;
  sluice::RuleSetPtr rules;
  sluice::Metrics metrics;
  sluice::StorePtr store;
  std::unique_ptr<sluice::DecisionService> service;
};

struct Harness {
  Harness() : path("/tmp/fuzz-memory-snapshot-" + std::to_string(::getpid()) + ".snap") {
    sluice::LoadResult loaded = sluice::loadRulesFromStrings({{"fuzz.yaml", kRules}});
    SLUICE_FUZZ_CHECK(loaded.rules != nullptr);
    rules = loaded.rules;
    // The store keys and limit identities of the rules' buckets, as the writer spells them.
    Sidecar seed(rules);
    for (std::size_t i = 0; i < std::size(kKeys); ++i) {
      seed.decide(i, 1);
    }
    sluice::ManualExecutor executor(seed.clock);
    options.path = path;
    auto snapshotter = sluice::makeMemorySnapshotter(
        *sluice::memoryCountersOf(*seed.store), options, [this] { return rules; }, seed.clock,
        executor, seed.metrics);
    SLUICE_FUZZ_CHECK(snapshotter->writeNow().ok());
    std::ifstream in(path, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto contents = sluice::memory_detail::parseSnapshot(bytes);
    SLUICE_FUZZ_CHECK(contents.ok() && !contents->records.empty());
    for (const auto& record : contents->records) {
      buckets.push_back({record.key, record.rule});
    }
  }

  /// A well-formed file of the records the input describes: per record a bucket index, the
  /// three state words, the expiry as an offset from the start, and a log of up to 15
  /// entries.
  std::string wellFormed(std::string_view input) const {
    std::string payload;
    std::uint32_t count = 0;
    std::size_t at = 0;
    const auto take = [&](std::size_t n) -> std::optional<std::string_view> {
      if (input.size() - at < n) {
        return std::nullopt;
      }
      std::string_view out = input.substr(at, n);
      at += n;
      return out;
    };
    const auto word = [](std::string_view bytes) {
      std::int64_t value = 0;
      std::memcpy(&value, bytes.data(), sizeof value);
      return value;
    };
    while (auto head = take(1 + 8 * 4 + 1)) {
      const auto& bucket = buckets[static_cast<unsigned char>((*head)[0]) % buckets.size()];
      const std::int64_t a = word(head->substr(1));
      const std::int64_t b = word(head->substr(9));
      const std::int64_t c = word(head->substr(17));
      const Micros expires = kStart + (word(head->substr(25)) % (400LL * 86'400'000'000));
      std::vector<sluice::LogEntry> log;
      const std::size_t entries = static_cast<unsigned char>((*head)[33]) % 16;
      for (std::size_t i = 0; i < entries; ++i) {
        auto entry = take(16);
        if (!entry) {
          break;
        }
        log.push_back(sluice::LogEntry{word(*entry), word(entry->substr(8))});
      }
      sluice::memory_detail::appendSnapshotRecord(payload, bucket.key, bucket.rule, a, b, c,
                                                  expires, log.empty() ? nullptr : &log);
      ++count;
    }
    std::string file;
    sluice::memory_detail::appendSnapshotHeader(file, kStart - 1'000'000);
    if (count > 0) {
      sluice::memory_detail::appendBlockHeader(file, payload, count);
      file += payload;
    }
    sluice::memory_detail::appendSnapshotEnd(file, count);
    return file;
  }

  void run(std::string_view file, std::string_view moves) {
    Sidecar sidecar(rules);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(file.data(), static_cast<std::streamsize>(file.size()));
    }
    auto restored =
        sluice::restoreMemorySnapshot(*sluice::memoryCountersOf(*sidecar.store), options, rules,
                                      sidecar.clock.nowMicros(), sidecar.metrics);
    if (!restored) {
      SLUICE_FUZZ_CHECK(restored.error().kind == sluice::ErrorKind::kInvalidArgument);
      SLUICE_FUZZ_CHECK(restored.error().message.find("offset") != std::string::npos);
      return;
    }
    // The decisions after the restore: each byte moves the clock and asks one rule.
    for (std::size_t i = 0; i < std::min<std::size_t>(moves.size(), 32); ++i) {
      const auto byte = static_cast<unsigned char>(moves[i]);
      sidecar.clock.advance(std::chrono::milliseconds((byte >> 4) * (byte >> 4) * 37));
      sidecar.decide(byte % std::size(kKeys), 1 + (byte >> 6));
    }
    for (std::size_t i = 0; i < std::size(kKeys); ++i) {
      sidecar.decide(i, 1);
    }
  }

  struct Bucket {
    std::string key;
    std::uint64_t rule;
  };
  std::string path;
  sluice::RuleSetPtr rules;
  sluice::MemorySnapshotOptions options;
  std::vector<Bucket> buckets;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Harness harness;
  if (size == 0) {
    return 0;
  }
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    harness.run(input, input.substr(input.size() / 2));
  } else {
    harness.run(harness.wellFormed(input), input.substr(input.size() / 3));
  }
  return 0;
}
