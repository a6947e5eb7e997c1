#include "sluice/decision/reservation.hpp"

#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <random>

#include "decision/reservation_steps.hpp"
#include "sluice/common/hex.hpp"
#include "sluice/common/value_parsers.hpp"
#include "sluice/common/words.hpp"
#include "sluice/decision/decision.hpp"

namespace sluice {
namespace {

constexpr std::string_view kIdVersion = "r1";

/// FNV-1a, 64 bits: the same in every process, so any sidecar checks another's id.
class Fnv {
 public:
  void add(std::string_view text) {
    for (const char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= kPrime;
    }
    // A separator no text can forge (lengths are part of the input).
    addLength(text.size());
  }
  /// The 8 bytes of `n`, lowest first. The high bytes of a length are zeros, which the
  /// xor leaves alone: they only multiply, by the prime's power at once.
  void addLength(std::size_t n) {
    if (n < 256) {
      // The usual length, one byte (or none: 0 xors nothing): the same as the loop below.
      hash_ = (hash_ ^ n) * kPrimePowers[8];
      return;
    }
    int i = 0;
    for (; i < 8 && (n >> (8 * i)) != 0; ++i) {
      hash_ ^= static_cast<unsigned char>(n >> (8 * i));
      hash_ *= kPrime;
    }
    hash_ *= kPrimePowers[static_cast<std::size_t>(8 - i)];
  }
  std::uint64_t value() const { return hash_; }

 private:
  static constexpr std::uint64_t kPrime = 1099511628211ULL;
  /// kPrime to the powers 0..8 (mod 2^64).
  static constexpr std::array<std::uint64_t, 9> kPrimePowers = [] {
    std::array<std::uint64_t, 9> powers{};
    powers[0] = 1;
    for (std::size_t k = 1; k < powers.size(); ++k) {
      powers[k] = powers[k - 1] * kPrime;
    }
    return powers;
  }();

  std::uint64_t hash_ = 14695981039346656037ULL;
};

Result<Micros> parseDurationFlag(std::string_view value, Micros min, Micros max) {
  const std::optional<Micros> parsed = parseDurationMicros(value);
  if (!parsed || *parsed < min || *parsed > max) {
    return makeError(ErrorKind::kInvalidArgument,
                     "must be a duration from " + std::to_string(min / 1000) + "ms to " +
                         std::to_string(max / kMicrosPerSecond) + "s such as 30s or 5m, got \"" +
                         std::string(value) + "\"");
  }
  return *parsed;
}

}  // namespace

void addReservationFlags(FlagRegistry& registry, ReservationSettings& settings) {
  constexpr Micros kMinTtl = 1000;
  constexpr Micros kMaxTtl = 7 * 24 * 3600 * kMicrosPerSecond;
  registry.section("Reservations");
  registry.add(
      {.name = "reservation-ttl",
       .metavar = "DURATION",
       .help =
           "lifetime of a reservation that names none, at most --max-reservation-ttl (default 60s)",
       .set = [&settings](std::string_view value) -> Status {
         auto ttl = parseDurationFlag(value, kMinTtl, kMaxTtl);
         if (!ttl) {
           return ttl.error();
         }
         settings.default_ttl_us = *ttl;
         return {};
       }});
  registry.add({.name = "max-reservation-ttl",
                .metavar = "DURATION",
                .help = "longest reservation; a longer ttl is refused (default 10m)",
                .set = [&settings](std::string_view value) -> Status {
                  auto ttl = parseDurationFlag(value, kMinTtl, kMaxTtl);
                  if (!ttl) {
                    return ttl.error();
                  }
                  settings.max_ttl_us = *ttl;
                  return {};
                }});
  registry.add({.name = "max-reservation-fraction",
                .metavar = "FRACTION",
                .help = "largest reservation as a fraction of each matched limit, over 0 and "
                        "at most 1 (default 1)",
                .set = [&settings](std::string_view value) -> Status {
                  double fraction = 0;
                  const auto [end, ec] =
                      std::from_chars(value.data(), value.data() + value.size(), fraction);
                  if (ec != std::errc() || end != value.data() + value.size() || !(fraction > 0) ||
                      fraction > 1) {
                    return makeError(ErrorKind::kInvalidArgument,
                                     "must be a number over 0 and at most 1, got \"" +
                                         std::string(value) + "\"");
                  }
                  settings.max_fraction = fraction;
                  return {};
                }});
  registry.add({.name = "max-reservation-holds",
                .metavar = "N",
                .help = "most live reservations one bucket may hold (default 1000)",
                .set = flag_setters::integer<std::int64_t>(settings.max_holds, 1, 100000)});
}

std::string formatReservationId(const ReservationId& id) {
  std::string out;
  reservation_detail::assignReservationId(out, id.expires_at_us, id.nonce, id.fingerprint);
  return out;
}

void reservation_detail::assignReservationId(std::string& out, Micros expires_at_us,
                                             std::string_view nonce, std::uint64_t fingerprint) {
  constexpr Micros kEight = 100000000;
  if (expires_at_us >= kEight * kEight / 10 && expires_at_us < kEight * kEight &&
      nonce.size() == 16) {
    // The usual id: an expiry of 16 digits (microseconds since the epoch), eight at a time,
    // and every part at a place known here.
    out.resize(53);
    char* p = out.data();
    std::memcpy(p, "r1.", 3);
    words::writeDecimal8(static_cast<std::uint32_t>(expires_at_us / kEight), p + 3);
    words::writeDecimal8(static_cast<std::uint32_t>(expires_at_us % kEight), p + 11);
    p[19] = '.';
    std::memcpy(p + 20, nonce.data(), 16);
    p[36] = '.';
    writeHex16(fingerprint, p + 37);
    return;
  }
  char expiry[24];
  const auto digits = static_cast<std::size_t>(
      std::to_chars(expiry, expiry + sizeof expiry, expires_at_us).ptr - expiry);
  // r1.<expiry>.<nonce>.<fingerprint>, written in place.
  out.resize(kIdVersion.size() + 1 + digits + 1 + nonce.size() + 1 + 16);
  char* p = out.data();
  std::memcpy(p, kIdVersion.data(), kIdVersion.size());
  p += kIdVersion.size();
  *p++ = '.';
  std::memcpy(p, expiry, digits);
  p += digits;
  *p++ = '.';
  std::memcpy(p, nonce.data(), nonce.size());
  p += nonce.size();
  *p++ = '.';
  writeHex16(fingerprint, p);
}

namespace {

/// Reads an id's parts without copying them: "" when `text` is an id, else why not.
std::string_view readReservationId(std::string_view text, Micros& expires_at_us,
                                   std::string_view& nonce, std::uint64_t& fingerprint) {
  constexpr std::string_view kShape = "expected r1.<expiry>.<16 hex>.<16 hex>, as /reserve answers";
  if (text.empty()) {
    return "empty";
  }
  if (text.size() > 80 || !text.starts_with("r1.")) {
    return kShape;
  }
  std::string_view rest = text;
  rest.remove_prefix(3);
  // The usual id has a 16-digit expiry: its dot is where it is expected.
  const std::size_t dot1 = rest.size() == 50 && rest[16] == '.' ? 16 : rest.find('.');
  if (dot1 == std::string_view::npos) {
    return kShape;
  }
  // A positive decimal number that fits (leading zeros allowed, no sign).
  std::string_view expiry(rest.data(), dot1);
  constexpr std::string_view kNotNumber = "its expiry is not a number";
  Micros value = 0;
  // 18 digits always fit (eight at a time while eight are left); a longer number is
  // checked digit by digit.
  const bool may_overflow = expiry.size() > 18;
  if (!may_overflow) {
    while (expiry.size() >= 8) {
      std::uint64_t eight = 0;
      if (!words::readDecimal8(expiry.data(), eight)) {
        return kNotNumber;
      }
      value = value * 100000000 + static_cast<Micros>(eight);
      expiry.remove_prefix(8);
    }
  }
  for (const char c : expiry) {
    if (c < '0' || c > '9') {
      return kNotNumber;
    }
    const int digit = c - '0';
    if (may_overflow && value > (std::numeric_limits<Micros>::max() - digit) / 10) {
      return kNotNumber;
    }
    value = value * 10 + digit;
  }
  if (value <= 0) {
    return kNotNumber;
  }
  expires_at_us = value;
  rest.remove_prefix(dot1 + 1);
  // The nonce is only checked: the store takes its text.
  if (rest.size() != 33 || rest[16] != '.' || !isHex16(std::string_view(rest.data(), 16)) ||
      !readHex16(std::string_view(rest.data() + 17, 16), fingerprint)) {
    return kShape;
  }
  nonce = std::string_view(rest.data(), 16);
  return {};
}

}  // namespace

Result<ReservationId> parseReservationId(std::string_view text) {
  ReservationId id;
  std::string_view nonce;
  const std::string_view why = readReservationId(text, id.expires_at_us, nonce, id.fingerprint);
  if (!why.empty()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "reservation_id: \"" + std::string(text.substr(0, 80)) +
                         "\" is not a reservation id (" + std::string(why) + ")");
  }
  id.nonce = std::string(nonce);
  return id;
}

bool reservation_detail::splitReservationId(std::string_view text, Micros& expires_at_us,
                                            std::string_view& nonce, std::uint64_t& fingerprint) {
  return readReservationId(text, expires_at_us, nonce, fingerprint).empty();
}

std::uint64_t reservationFingerprint(const DecisionRequest& request) {
  Fnv fnv;
  fnv.add(request.domain);
  fnv.add(request.client_id);
  fnv.addLength(request.descriptors.size());
  for (const Descriptor& descriptor : request.descriptors) {
    fnv.addLength(descriptor.size());
    for (const auto& entry : descriptor) {
      fnv.add(entry.key);
      fnv.add(entry.value);
    }
  }
  return fnv.value();
}

std::string newReservationNonce() {
  std::string out;
  reservation_detail::assignReservationNonce(out);
  return out;
}

void reservation_detail::assignReservationNonce(std::string& out) {
  thread_local std::mt19937_64 generator{[] {
    std::random_device random;
    return (static_cast<std::uint64_t>(random()) << 32) ^ random();
  }()};
  out.resize(16);  // keeps the capacity of the string it is given
  writeHex16(generator(), out.data());
}

std::string_view holdStatusName(HoldStatus status) {
  switch (status) {
    case HoldStatus::kNone:
      return "";
    case HoldStatus::kReserved:
      return "reserved";
    case HoldStatus::kDenied:
      return "denied";
    case HoldStatus::kFull:
      return "full";
    case HoldStatus::kCommitted:
      return "committed";
    case HoldStatus::kLate:
      return "late";
    case HoldStatus::kReleased:
      return "released";
    case HoldStatus::kSettled:
      return "settled";
    case HoldStatus::kExpired:
      return "expired";
    case HoldStatus::kUnknown:
      return "unknown";
  }
  return "";
}

}  // namespace sluice
