#include "sluice/decision/lease_id.hpp"

#include <array>
#include <cstdint>

#include "sluice/common/varint.hpp"

namespace sluice {
namespace {

constexpr std::string_view kPrefix = "l1.";
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Bounds of a decoded token: those of a decision request (request_shape.hpp).
constexpr std::uint64_t kMaxDescriptors = 64;
constexpr std::uint64_t kMaxEntries = 32;
constexpr std::uint64_t kMaxString = 1024;

void putString(std::string& out, std::string_view s) {
  putVarint(out, s.size());
  out.append(s);
}

std::string base64url(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const std::uint32_t v = (static_cast<std::uint8_t>(bytes[i]) << 16) |
                            (static_cast<std::uint8_t>(bytes[i + 1]) << 8) |
                            static_cast<std::uint8_t>(bytes[i + 2]);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (rest == 2) {
      v |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    }
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    if (rest == 2) {
      out.push_back(kAlphabet[(v >> 6) & 63]);
    }
  }
  return out;
}

bool unbase64url(std::string_view text, std::string& out) {
  std::array<int, 256> value{};
  value.fill(-1);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    value[static_cast<std::uint8_t>(kAlphabet[i])] = static_cast<int>(i);
  }
  if (text.size() % 4 == 1) {
    return false;
  }
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int v = value[static_cast<std::uint8_t>(c)];
    if (v < 0) {
      return false;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

/// Reads the token's bytes in order; any overrun or bound makes it fail.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool varint(std::uint64_t& v) { return readVarint(bytes_, at_, v); }

  bool string(std::string& s) {
    std::uint64_t size = 0;
    if (!varint(size) || size > kMaxString || size > bytes_.size() - at_) {
      return false;
    }
    s.assign(bytes_.substr(at_, size));
    at_ += size;
    return true;
  }

  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

bool readToken(std::string_view bytes, LeaseToken& token) {
  Reader in(bytes);
  std::uint64_t lease = 0;
  std::uint64_t count = 0;
  if (!in.varint(lease) || lease == 0 || lease > static_cast<std::uint64_t>(kMaxLeaseNumber) ||
      !in.string(token.domain) || !in.string(token.client_id) || !in.varint(count) ||
      count > kMaxDescriptors) {
    return false;
  }
  token.lease = static_cast<LeaseNumber>(lease);
  token.descriptors.resize(count);
  for (Descriptor& descriptor : token.descriptors) {
    std::uint64_t entries = 0;
    if (!in.varint(entries) || entries > kMaxEntries) {
      return false;
    }
    descriptor.resize(entries);
    for (Entry& entry : descriptor) {
      if (!in.string(entry.key) || !in.string(entry.value)) {
        return false;
      }
    }
  }
  return in.done() && !token.domain.empty();
}

}  // namespace

std::string encodeLeaseId(const LeaseToken& token) {
  std::string bytes;
  putVarint(bytes, static_cast<std::uint64_t>(token.lease));
  putString(bytes, token.domain);
  putString(bytes, token.client_id);
  putVarint(bytes, token.descriptors.size());
  for (const Descriptor& descriptor : token.descriptors) {
    putVarint(bytes, descriptor.size());
    for (const Entry& entry : descriptor) {
      putString(bytes, entry.key);
      putString(bytes, entry.value);
    }
  }
  return std::string(kPrefix) + base64url(bytes);
}

Result<LeaseToken> decodeLeaseId(std::string_view id) {
  if (id.empty()) {
    return makeError(ErrorKind::kInvalidArgument, "lease: must be a non-empty lease id");
  }
  if (id.size() > kMaxLeaseIdBytes) {
    return makeError(ErrorKind::kInvalidArgument, "lease: longer than any lease id (" +
                                                      std::to_string(kMaxLeaseIdBytes) + " bytes)");
  }
  std::string bytes;
  LeaseToken token;
  if (id.substr(0, kPrefix.size()) != kPrefix || !unbase64url(id.substr(kPrefix.size()), bytes) ||
      !readToken(bytes, token)) {
    return makeError(ErrorKind::kInvalidArgument,
                     "lease: not a lease id (it must be the \"lease\" of an answer, as given)");
  }
  return token;
}

}  // namespace sluice
