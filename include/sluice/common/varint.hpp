#pragma once

// Protobuf's base-128 varint, the one integer encoding of the byte formats Sluice reads and
// writes by hand (the gRPC server's small messages, the lease id's token).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

/// The bytes writeVarint() and putVarint() take for `value`.
inline std::size_t varintSize(std::uint64_t value) {
  std::size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

/// Writes `value` as a varint at `p` (room for varintSize(value)); returns the end.
inline char* writeVarint(char* p, std::uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

/// Appends `value` as a varint (7 bits a byte, low bits first).
inline void putVarint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

/// Reads a varint of `data` at `pos`, moving `pos` past it. False when the data ends first
/// or the varint runs past ten bytes (64 bits).
inline bool readVarint(std::string_view data, std::size_t& pos, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) {
      return false;
    }
    const auto byte = static_cast<std::uint8_t>(data[pos++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice
