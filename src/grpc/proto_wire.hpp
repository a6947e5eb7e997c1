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

/// Protobuf wire reading, enough for the small messages served here by hand.
struct WireReader {
  std::string_view data;
  std::size_t pos = 0;

  bool varint(std::uint64_t& value) { return readVarint(data, pos, value); }

  /// The next field: its number, and its bytes when length-delimited. False at the end or
  /// on malformed input (`bad`).
  bool next(std::uint32_t& field, std::string_view& bytes, bool& bad) {
    bad = false;
    if (pos >= data.size()) {
      return false;
    }
    std::uint64_t key = 0;
    std::uint64_t value = 0;
    if (!varint(key)) {
      bad = true;
      return false;
    }
    field = static_cast<std::uint32_t>(key >> 3);
    bytes = {};
    switch (key & 7) {
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
        bad = !varint(value) || value > data.size() - pos;
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

/// gRPC's message prefix: not compressed, then the length (big-endian).
inline void putFrameHeader(std::string& out, std::size_t length) {
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((length >> shift) & 0xff));
  }
}

}  // namespace sluice::grpc::wire
