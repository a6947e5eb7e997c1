#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace sluice::simulate {

/// Exit statuses of `sluice simulate` (docs/what-if.md, "Exit status").
inline constexpr int kExitPassed = 0;
inline constexpr int kExitError = 1;          ///< bad arguments, rules, map or unreadable log
inline constexpr int kExitMalformed = 2;      ///< a malformed line under --strict
inline constexpr int kExitNewlyDenied = 3;    ///< --fail-if-newly-denied exceeded
inline constexpr int kExitClientsDenied = 4;  ///< --fail-if-newly-denied-clients exceeded
inline constexpr int kExitEmptyLog = 5;       ///< no request to replay

/// `sluice simulate --rules NEW [--baseline OLD]... --log FILE... [options]`: `args` are
/// those after "simulate". The report goes to `out`, problems to `err`.
int runSimulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The usage text.
std::string simulateHelp();

}  // namespace sluice::simulate
