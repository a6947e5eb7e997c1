#include "store/redis/redis_bans.hpp"

#include <algorithm>

namespace sluice::redis {

void appendBanArguments(const StoreRequest& request, std::size_t values_per_limit,
                        std::vector<std::string>& args) {
  for (std::size_t i = 0; i < request.limits.size(); ++i) {
    const StoreLimit& limit = request.limits[i];
    if (!banApplies(request, limit) || limit.params.algorithm == Algorithm::kSketch) {
      continue;
    }
    // args[k] is ARGV[k + 1]: the first value about to be added is ARGV[args.size() + 1].
    const std::size_t at = args.size() + 1;
    const BanParams& ban = limit.params.ban;
    for (const std::int64_t value : {ban.after, ban.duration_us, ban.backoff_milli, ban.max_us,
                                     ban.forgive_us, ban.within_us}) {
      args.push_back(std::to_string(value));
    }
    args[1 + i * values_per_limit + 8] += "@" + std::to_string(at);
  }
}

void appendBanSignature(const StoreRequest& request, const StoreLimit& limit,
                        std::vector<std::int64_t>& signature) {
  if (!banApplies(request, limit)) {
    signature.insert(signature.end(), {0, 0, 0, 0, 0, 0});
    return;
  }
  const BanParams& ban = limit.params.ban;
  signature.insert(signature.end(), {ban.after, ban.duration_us, ban.backoff_milli, ban.max_us,
                                     ban.forgive_us, ban.within_us});
}

void readNeverSlot(std::int64_t value, Outcome& outcome) {
  outcome.never = value == 1;
  outcome.banned = value >= 2;
  outcome.ban_step =
      value > 2 ? static_cast<std::int32_t>(std::min<std::int64_t>(value - 2, 1 << 30)) : 0;
}

}  // namespace sluice::redis
