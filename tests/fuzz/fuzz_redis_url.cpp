// --redis / SLUICE_REDIS URLs: parseRedisUrl (src/store/redis/redis_url.cpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "sluice/store/redis_store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  sluice::RedisOptions base;
  base.key_prefix = "fuzz";
  auto parsed = sluice::parseRedisUrl(url, base);
  if (!parsed) {
    SLUICE_FUZZ_CHECK(parsed.error().kind == sluice::ErrorKind::kInvalidArgument);
    return 0;
  }
  const sluice::RedisOptions& options = *parsed;
  SLUICE_FUZZ_CHECK(options.key_prefix == "fuzz");
  SLUICE_FUZZ_CHECK(options.db >= 0);
  if (options.unix_path.empty()) {
    SLUICE_FUZZ_CHECK(!options.host.empty());
    SLUICE_FUZZ_CHECK(options.port >= 1 && options.port <= 65535);
  }
  return 0;
}
