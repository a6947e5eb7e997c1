// parsePlainRequest() (src/http/plain_request.cpp), the sessions' reader of plain requests,
// against Beast's parser: every request it reads, Beast reads the same way (length, version,
// keep-alive, method, target, fields, body); what it declines goes to Beast anyway.
//
// Input: the first byte picks the limits (small ones reach the header and body limits), the
// rest is the bytes on the connection.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "plain_request_oracle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const sluice::http::PlainLimits limits = (data[0] & 1) != 0
                                               ? sluice::http::PlainLimits{96, 16}
                                               : sluice::http::PlainLimits{8192, 4096};
  const std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto plain = sluice::http::testing::readPlain(wire, limits);
  if (plain) {
    const auto beast = sluice::http::testing::readWithBeast(wire, limits);
    SLUICE_FUZZ_CHECK(sluice::http::testing::differs(*plain, beast).empty());
  }
  return 0;
}
