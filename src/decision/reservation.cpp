#include "sluice/decision/reservation.hpp"

#include <charconv>
#include <random>

#include "sluice/common/value_parsers.hpp"
#include "sluice/decision/decision.hpp"

namespace sluice {
namespace {

constexpr std::string_view kIdVersion = "r1";

std::string hex16(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kDigits[value & 0xf];
    value >>= 4;
  }
  return out;
}

bool isHex16(std::string_view text) {
  if (text.size() != 16) {
    return false;
  }
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

/// FNV-1a, 64 bits: the same in every process, so any sidecar checks another's id.
class Fnv {
 public:
  void add(std::string_view text) {
    for (const char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 1099511628211ULL;
    }
    // A separator no text can forge (lengths are part of the input).
    addLength(text.size());
  }
  void addLength(std::size_t n) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= static_cast<unsigned char>(n >> (8 * i));
      hash_ *= 1099511628211ULL;
    }
  }
  std::uint64_t value() const { return hash_; }

 private:
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
  registry.add({.name = "reservation-ttl",
                .metavar = "DURATION",
                .help = "lifetime of a reservation that names none, at most --max-reservation-ttl (default 60s)",
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
  std::string out(kIdVersion);
  out += '.';
  out += std::to_string(id.expires_at_us);
  out += '.';
  out += id.nonce;
  out += '.';
  out += hex16(id.fingerprint);
  return out;
}

Result<ReservationId> parseReservationId(std::string_view text) {
  const auto bad = [&text](std::string_view why) {
    return makeError(ErrorKind::kInvalidArgument,
                     "reservation_id: \"" + std::string(text.substr(0, 80)) +
                         "\" is not a reservation id (" + std::string(why) + ")");
  };
  if (text.empty()) {
    return bad("empty");
  }
  if (text.size() > 80 || text.substr(0, 3) != "r1.") {
    return bad("expected r1.<expiry>.<16 hex>.<16 hex>, as /reserve answers");
  }
  std::string_view rest = text.substr(3);
  const std::size_t dot1 = rest.find('.');
  if (dot1 == std::string_view::npos) {
    return bad("expected r1.<expiry>.<16 hex>.<16 hex>, as /reserve answers");
  }
  ReservationId id;
  const std::string_view expiry = rest.substr(0, dot1);
  const auto [end, ec] =
      std::from_chars(expiry.data(), expiry.data() + expiry.size(), id.expires_at_us);
  if (ec != std::errc() || end != expiry.data() + expiry.size() || id.expires_at_us <= 0) {
    return bad("its expiry is not a number");
  }
  rest = rest.substr(dot1 + 1);
  if (rest.size() != 33 || rest[16] != '.' || !isHex16(rest.substr(0, 16)) ||
      !isHex16(rest.substr(17))) {
    return bad("expected r1.<expiry>.<16 hex>.<16 hex>, as /reserve answers");
  }
  id.nonce = std::string(rest.substr(0, 16));
  const std::string_view fp = rest.substr(17);
  std::from_chars(fp.data(), fp.data() + fp.size(), id.fingerprint, 16);
  return id;
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
  thread_local std::mt19937_64 generator{[] {
    std::random_device random;
    return (static_cast<std::uint64_t>(random()) << 32) ^ random();
  }()};
  return hex16(generator());
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
