#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"

/// The lease id a decision that takes leases answers with (docs/algorithms.md,
/// "concurrency"): opaque to callers, it carries what a release or renew needs to find the
/// lease again without any other state: the lease number, the domain, the client and the
/// descriptors whose concurrency limits hold it. A release matches those descriptors
/// against the current rules, so the buckets (and their rule names) are Sluice's own, never
/// taken from the id. Guessing another lease's id means guessing a 53-bit random number.
namespace sluice {

struct LeaseToken {
  LeaseNumber lease = 0;
  std::string domain;
  std::string client_id;
  std::vector<Descriptor> descriptors;
};

/// "l1." then the token in base64url (no padding).
std::string encodeLeaseId(const LeaseToken& token);

/// The token of a lease id; kInvalidArgument ("lease: ...") when it is not one.
Result<LeaseToken> decodeLeaseId(std::string_view id);

/// The longest lease id accepted (an id is never longer than its request's bounds allow).
inline constexpr std::size_t kMaxLeaseIdBytes = 16 * 1024;

/// The descriptor entry key that names a lease in a refund descriptor of Envoy's API
/// (`is_negative_hits`): `lease_id=<id>`, which Envoy's `metadata` rate-limit action reads
/// from the decision's dynamic metadata (docs/envoy.md). Also the dynamic metadata's key.
inline constexpr std::string_view kLeaseIdKey = "lease_id";

/// The response header that carries a decision's lease id (HTTP answers and /check).
inline constexpr std::string_view kLeaseHeader = "X-Sluice-Lease";

}  // namespace sluice
