#pragma once

#include <string_view>

#include "sluice/simulate/access_record.hpp"

namespace sluice::simulate {

/// The fast path of parseAccessLine for a line as Sluice's access log writes it
/// (appendAccessJson): its members in its order, without optional ones, spaces or escapes.
/// True with `out` filled exactly as the general parser would fill it; false for any other
/// line (or any doubt), `out` then in no particular state: the general parser reads the line
/// again from the start, and says what is wrong with it if anything is.
bool parseWrittenLine(std::string_view line, LoggedRequest& out);

}  // namespace sluice::simulate
