#include "sluice/common/located_error.hpp"

namespace sluice {

std::string LocatedError::toString() const {
  std::string out = location.file;
  if (location.line > 0) {
    out += ':' + std::to_string(location.line) + ':' + std::to_string(location.column);
  }
  out += ": ";
  out += message;
  return out;
}

}  // namespace sluice
