#pragma once

namespace sluice {

/// The value of one hexadecimal digit (either case), or -1 if `ch` is not one.
/// Shared by the percent-decoders of forward auth and Redis URLs.
constexpr int hexValue(char ch) {
  if (ch >= '0' && ch <= '9') {
    return ch - '0';
  }
  if (ch >= 'a' && ch <= 'f') {
    return ch - 'a' + 10;
  }
  if (ch >= 'A' && ch <= 'F') {
    return ch - 'A' + 10;
  }
  return -1;
}

}  // namespace sluice
