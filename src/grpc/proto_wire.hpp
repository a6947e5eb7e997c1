#pragma once

// Protobuf's wire format, enough for the small messages the gRPC server answers by hand
// (health, reflection) and for gRPC's length prefix; private to the grpc module.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/common/varint.hpp"

namespace sluice::grpc::wire {

using sluice::putVarint;

/// Wire types of the fields read here.
inline constexpr std::uint32_t kWireVarint = 0;
inline constexpr std::uint32_t kWireDelimited = 2;

/// Protobuf wire reading, enough for the small messages served here by hand.
struct WireReader {
  std::string_view data;
  std::size_t pos = 0;
  std::uint32_t type = 0;   ///< the last field's wire type (kWireVarint, kWireDelimited, ...)
  std::uint64_t value = 0;  ///< the last varint field's value (its length when delimited)

  bool varint(std::uint64_t& out) { return readVarint(data, pos, out); }

  /// The next field: its number, and its bytes when length-delimited. False at the end or
  /// on malformed input (`bad`), which includes a key or a length written in more than 5
  /// bytes (protobuf's parser refuses both).
  bool next(std::uint32_t& field, std::string_view& bytes, bool& bad) {
    bad = false;
    if (pos >= data.size()) {
      return false;
    }
    std::uint64_t key = 0;
    std::size_t start = pos;
    if (!varint(key) || pos - start > 5) {
      bad = true;
      return false;
    }
    field = static_cast<std::uint32_t>(key >> 3);
    type = static_cast<std::uint32_t>(key & 7);
    value = 0;
    bytes = {};
    switch (type) {
      case 0:
        bad = !varint(value);
        break;
      case 1:
        bad = data.size() - pos < 8;
        pos += bad ? 0 : 8;
        break;
      case 5:
        bad = data.size() - pos < 4;
        pos += bad ? 0 : 4;
        break;
      case 2:
        start = pos;
        bad = !varint(value) || pos - start > 5 || value > data.size() - pos;
        if (!bad) {
          bytes = data.substr(pos, value);
          pos += value;
        }
        break;
      default:
        bad = true;
    }
    return !bad;
  }
};

/// A length-delimited field.
inline void putBytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  putVarint(out, (field << 3) | 2);
  putVarint(out, bytes.size());
  out.append(bytes);
}

/// The bytes of gRPC's message prefix.
inline constexpr std::size_t kFrameHeaderBytes = 5;

/// gRPC's message prefix at `at` (room for kFrameHeaderBytes): not compressed, then the
/// length (big-endian).
inline void writeFrameHeader(char* at, std::size_t length) {
  at[0] = '\0';
  for (int i = 1, shift = 24; shift >= 0; ++i, shift -= 8) {
    at[i] = static_cast<char>((length >> shift) & 0xff);
  }
}

/// gRPC's message prefix, appended.
inline void putFrameHeader(std::string& out, std::size_t length) {
  char prefix[kFrameHeaderBytes];
  writeFrameHeader(prefix, length);
  out.append(prefix, kFrameHeaderBytes);
}

}  // namespace sluice::grpc::wire
