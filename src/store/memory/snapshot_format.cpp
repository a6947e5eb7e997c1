#include "store/memory/snapshot_format.hpp"

#include <zlib.h>

#include <cstring>
#include <limits>

namespace sluice::memory_detail {
namespace {

void putU32(std::string& out, std::uint32_t v) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) {
    bytes[i] = static_cast<char>((v >> (8 * i)) & 0xffU);
  }
  out.append(bytes, 4);
}

void putU64(std::string& out, std::uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((v >> (8 * i)) & 0xffU);
  }
  out.append(bytes, 8);
}

void putI64(std::string& out, std::int64_t v) { putU64(out, static_cast<std::uint64_t>(v)); }

std::uint64_t readU64(const char* at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(at[i]);
  }
  return v;
}

std::int64_t readI64(const char* at) { return static_cast<std::int64_t>(readU64(at)); }

Error errorAt(std::size_t offset, const std::string& what) {
  return makeError(ErrorKind::kInvalidArgument, "offset " + std::to_string(offset) + ": " + what);
}

/// Reads the records of one block's payload (at `base` in the file) into `out`.
Status parseRecords(std::string_view payload, std::size_t base, std::uint32_t count,
                    std::vector<SnapshotRecord>& out) {
  std::size_t at = 0;
  const auto need = [&](std::size_t bytes) { return payload.size() - at >= bytes; };
  for (std::uint32_t r = 0; r < count; ++r) {
    const std::size_t record_at = base + at;
    if (!need(4)) {
      return errorAt(record_at, "malformed record: the block ends inside it");
    }
    const std::size_t key_length = readU32(payload.data() + at);
    at += 4;
    if (!need(key_length) || payload.size() - at - key_length < 8 + 32 + 4) {
      return errorAt(record_at, "malformed record: a key of " + std::to_string(key_length) +
                                    " bytes runs past the block");
    }
    SnapshotRecord record;
    record.key.assign(payload.data() + at, key_length);
    at += key_length;
    record.rule = readU64(payload.data() + at);
    record.state.a = readI64(payload.data() + at + 8);
    record.state.b = readI64(payload.data() + at + 16);
    record.state.c = readI64(payload.data() + at + 24);
    record.expires_at = readI64(payload.data() + at + 32);
    const std::size_t log_count = readU32(payload.data() + at + 40);
    at += 44;
    if ((payload.size() - at) / 16 < log_count) {
      return errorAt(record_at, "malformed record: a log of " + std::to_string(log_count) +
                                    " entries runs past the block");
    }
    record.state.log.reserve(log_count);
    for (std::size_t i = 0; i < log_count; ++i) {
      record.state.log.push_back(
          LogEntry{readI64(payload.data() + at), readI64(payload.data() + at + 8)});
      at += 16;
    }
    out.push_back(std::move(record));
  }
  if (at != payload.size()) {
    return errorAt(base + at, "malformed block: " + std::to_string(payload.size() - at) +
                                  " bytes after its last record");
  }
  return {};
}

}  // namespace

std::uint32_t readU32(const char* at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(at[i]);
  }
  return v;
}

std::uint32_t snapshotCrc(std::string_view bytes, std::uint32_t crc) {
  // zlib's crc32 takes an unsigned int length: feed it in pieces.
  uLong value = crc;
  while (!bytes.empty()) {
    const std::size_t piece = std::min<std::size_t>(bytes.size(), 1u << 30);
    value = crc32(value, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(piece));
    bytes.remove_prefix(piece);
  }
  return static_cast<std::uint32_t>(value);
}

void appendSnapshotHeader(std::string& out, Micros written_at) {
  const std::size_t start = out.size();
  out.append(kSnapshotMagic);
  putU32(out, kSnapshotVersion);
  putU32(out, 0);
  putI64(out, written_at);
  putU32(out, snapshotCrc(std::string_view(out).substr(start)));
}

void appendSnapshotRecord(std::string& out, std::string_view key, std::uint64_t rule,
                          std::int64_t a, std::int64_t b, std::int64_t c, Micros expires_at,
                          const std::vector<LogEntry>* log) {
  putU32(out, static_cast<std::uint32_t>(key.size()));
  out.append(key);
  putU64(out, rule);
  putI64(out, a);
  putI64(out, b);
  putI64(out, c);
  putI64(out, expires_at);
  putU32(out, log != nullptr ? static_cast<std::uint32_t>(log->size()) : 0);
  if (log != nullptr) {
    for (const LogEntry& entry : *log) {
      putI64(out, entry.at);
      putI64(out, entry.cost);
    }
  }
}

void appendBlockHeader(std::string& out, std::string_view payload, std::uint32_t records) {
  putU32(out, static_cast<std::uint32_t>(payload.size()));
  putU32(out, records);
  putU32(out, snapshotCrc(payload));
}

void appendSnapshotEnd(std::string& out, std::uint64_t total_records) {
  const std::size_t start = out.size();
  putU32(out, 0);
  putU32(out, 0);
  putU64(out, total_records);
  putU32(out, snapshotCrc(std::string_view(out).substr(start)));
}

Result<SnapshotContents> parseSnapshot(std::string_view bytes) {
  if (bytes.substr(0, kSnapshotMagic.size()) != kSnapshotMagic.substr(0, bytes.size())) {
    return errorAt(0, "not a Sluice memory snapshot (bad magic)");
  }
  if (bytes.size() < kSnapshotHeaderBytes) {
    return errorAt(0, "truncated: the header needs " + std::to_string(kSnapshotHeaderBytes) +
                          " bytes, " + std::to_string(bytes.size()) + " are left");
  }
  if (snapshotCrc(bytes.substr(0, 24)) != readU32(bytes.data() + 24)) {
    return errorAt(0, "checksum mismatch in the header");
  }
  const std::uint32_t version = readU32(bytes.data() + 8);
  if (version != kSnapshotVersion) {
    return errorAt(8, "format version " + std::to_string(version) + " (this Sluice reads " +
                          std::to_string(kSnapshotVersion) + ")");
  }
  SnapshotContents contents;
  contents.written_at = readI64(bytes.data() + 16);
  std::size_t at = kSnapshotHeaderBytes;
  std::uint64_t total = 0;
  while (true) {
    if (bytes.size() - at < 8) {
      return errorAt(at, "truncated: the file ends before its end marker");
    }
    const std::uint32_t length = readU32(bytes.data() + at);
    const std::uint32_t count = readU32(bytes.data() + at + 4);
    if (length == 0) {
      if (bytes.size() - at < kSnapshotEndBytes) {
        return errorAt(at, "truncated: the end marker needs " + std::to_string(kSnapshotEndBytes) +
                               " bytes, " + std::to_string(bytes.size() - at) + " are left");
      }
      if (snapshotCrc(bytes.substr(at, 16)) != readU32(bytes.data() + at + 16)) {
        return errorAt(at, "checksum mismatch in the end marker");
      }
      if (count != 0 || readU64(bytes.data() + at + 8) != total) {
        return errorAt(at, "the end marker counts " +
                               std::to_string(readU64(bytes.data() + at + 8)) +
                               " records, the blocks hold " + std::to_string(total));
      }
      if (at + kSnapshotEndBytes != bytes.size()) {
        return errorAt(at + kSnapshotEndBytes, "bytes after the end marker");
      }
      return contents;
    }
    if (length > kMaxBlockBytes) {
      return errorAt(at, "a block of " + std::to_string(length) + " bytes (at most " +
                             std::to_string(kMaxBlockBytes) + ")");
    }
    if (bytes.size() - at < kBlockHeaderBytes + std::size_t{length}) {
      return errorAt(at, "truncated: the block needs " +
                             std::to_string(kBlockHeaderBytes + std::size_t{length}) + " bytes, " +
                             std::to_string(bytes.size() - at) + " are left");
    }
    const std::string_view payload = bytes.substr(at + kBlockHeaderBytes, length);
    if (snapshotCrc(payload) != readU32(bytes.data() + at + 8)) {
      return errorAt(at, "checksum mismatch in the block");
    }
    if (Status parsed = parseRecords(payload, at + kBlockHeaderBytes, count, contents.records);
        !parsed) {
      return parsed.error();
    }
    total += count;
    at += kBlockHeaderBytes + length;
  }
}

}  // namespace sluice::memory_detail
