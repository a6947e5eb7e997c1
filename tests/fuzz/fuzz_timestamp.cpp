// Small text validators fed by requests and rules: http::isIso8601DateTime (the `timestamp`
// of /shouldAllowRequest), parseDuration, parseUnit and parseAlgorithm (rules values).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/decision_codec.hpp"
#include "sluice/rules/rules.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (sluice::http::isIso8601DateTime(text)) {
    // YYYY-MM-DDTHH:MM:SS at least, at most fraction digits plus a ±HH:MM offset.
    SLUICE_FUZZ_CHECK(text.size() >= 19);
    SLUICE_FUZZ_CHECK(text[4] == '-' && text[7] == '-' && text[13] == ':' && text[16] == ':');
  }
  if (auto duration = sluice::parseDuration(text)) {
    SLUICE_FUZZ_CHECK(*duration >= 0);
  }
  if (auto unit = sluice::parseUnit(text)) {
    SLUICE_FUZZ_CHECK(sluice::unitMicros(*unit) > 0);
    SLUICE_FUZZ_CHECK(sluice::parseUnit(sluice::unitName(*unit)) == unit);
  }
  if (auto algorithm = sluice::parseAlgorithm(text)) {
    SLUICE_FUZZ_CHECK(sluice::parseAlgorithm(sluice::algorithmName(*algorithm)) == algorithm);
  }
  return 0;
}
