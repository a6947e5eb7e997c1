#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/limiter/limiter.hpp"

/// The memory store's snapshot file (docs/operations.md, "Counters across restarts"): what
/// the writer lays out and the one reader of it. Private to the store. Every integer is
/// little-endian.
///
///   header  = magic "SLUICESN" (8 bytes), version u32 (1), reserved u32 (0),
///             written_at i64 (µs since the epoch), crc32 u32 of the 24 bytes before it
///   block*  = payload_length u32 (1 .. kMaxBlockBytes), record_count u32,
///             crc32 u32 of the payload, payload (record_count records)
///   end     = payload_length u32 0, record_count u32 0, total_records u64 (all blocks),
///             crc32 u32 of the 16 bytes before it
///   record  = key_length u32, key, rule u64, a i64, b i64, c i64, expires_at i64 (µs),
///             log_count u32, log_count x (at i64, cost i64)
///
/// `rule` identifies the limit the bucket belongs to (its key and parameters: see
/// snapshot_rules.hpp); 0 for a bucket no rule names.
namespace sluice::memory_detail {

inline constexpr std::string_view kSnapshotMagic{"SLUICESN", 8};
inline constexpr std::uint32_t kSnapshotVersion = 1;
inline constexpr std::size_t kSnapshotHeaderBytes = 28;
inline constexpr std::size_t kBlockHeaderBytes = 12;
inline constexpr std::size_t kSnapshotEndBytes = 20;
/// A block's payload is at most this long; the writer starts a new block before it.
inline constexpr std::size_t kMaxBlockBytes = 64u << 20;

/// One bucket as the file holds it.
struct SnapshotRecord {
  std::string key;
  std::uint64_t rule = 0;
  BucketState state;
  Micros expires_at = 0;
};

/// Appends the file's header, one record, a block's header (over a payload), the end.
void appendSnapshotHeader(std::string& out, Micros written_at);
void appendSnapshotRecord(std::string& out, std::string_view key, std::uint64_t rule,
                          std::int64_t a, std::int64_t b, std::int64_t c, Micros expires_at,
                          const std::vector<LogEntry>* log);
void appendBlockHeader(std::string& out, std::string_view payload, std::uint32_t records);
void appendSnapshotEnd(std::string& out, std::uint64_t total_records);

/// Walks the records of a block's payload (already checked by its crc), calling
/// `visit(key, rule_offset)` with each record's key and the payload offset of its `rule`
/// field, which the writer fills after the shard's lock is released. False when the
/// payload is not a sequence of whole records.
template <typename Visit>
bool forEachRecordKey(std::string& payload, Visit&& visit);

/// CRC-32 (zlib's) of `bytes`.
std::uint32_t snapshotCrc(std::string_view bytes, std::uint32_t crc = 0);

/// A snapshot as read: its records and when it was written.
struct SnapshotContents {
  Micros written_at = 0;
  std::vector<SnapshotRecord> records;
};

/// Reads a whole snapshot file's bytes. Errors (ErrorKind::kInvalidArgument) name the byte
/// offset: "offset 0: not a Sluice memory snapshot (bad magic)", "offset 4096: truncated:
/// the block needs 65536 bytes, 1200 are left", "offset 28: checksum mismatch in the
/// block", "offset 12: format version 9 (this Sluice reads 1)".
Result<SnapshotContents> parseSnapshot(std::string_view bytes);

// --- implementation --------------------------------------------------------------------

std::uint32_t readU32(const char* at);

template <typename Visit>
bool forEachRecordKey(std::string& payload, Visit&& visit) {
  std::size_t at = 0;
  while (at < payload.size()) {
    if (payload.size() - at < 4) {
      return false;
    }
    const std::size_t key_length = readU32(payload.data() + at);
    if (payload.size() - at - 4 < key_length + 8 + 32 + 4) {
      return false;
    }
    const std::string_view key(payload.data() + at + 4, key_length);
    const std::size_t rule_at = at + 4 + key_length;
    const std::size_t log_at = rule_at + 8 + 32;
    const std::size_t log_count = readU32(payload.data() + log_at);
    if ((payload.size() - log_at - 4) / 16 < log_count) {
      return false;
    }
    visit(key, rule_at);
    at = log_at + 4 + 16 * log_count;
  }
  return true;
}

}  // namespace sluice::memory_detail
