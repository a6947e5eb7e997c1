#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/http/message.hpp"

namespace sluice::http {

/// The limits a request is read under (ServerOptions::max_header_bytes, max_body_bytes).
struct PlainLimits {
  std::size_t header_bytes = 0;
  std::uint64_t body_bytes = 0;
};

/// Reads one whole request from the start of `data` when it has the plain form nearly every
/// client sends: `METHOD SP target SP HTTP/1.1|HTTP/1.0 CRLF`, header fields of visible
/// ASCII (SP and HTAB inside values) each ending in CRLF, an empty line, and a body of
/// exactly its Content-Length, all of it in `data` and within `limits`. Returns the bytes
/// the request takes (the next pipelined one follows), with `request`'s method, target,
/// headers and body filled as RequestParser fills them (fields as sent, values without
/// surrounding whitespace; strings keep their capacity), except that the header fields are
/// views of `data` (which must outlive their use: the session's read buffer, untouched until
/// the handler returns), `version` 10 or 11 and
/// `keep_alive` as keepAlive() (request_parser.hpp) says.
///
/// Returns 0, and the caller reads the same bytes with Beast (RequestParser), for anything
/// else: an incomplete request; obs-fold, obs-text, a bare LF, leading empty lines;
/// Transfer-Encoding, Upgrade, Proxy-Connection, a second Content-Length or one that is not
/// plain digits, a Connection other than `close` or `keep-alive`; a header or body at or
/// beyond its limit. What this function accepts Beast accepts with the same result
/// (tests/unit/http/plain_request_test.cpp, fuzz_plain_request), so errors, limits and
/// everything unusual stay Beast's, and a plain request skips its parser's cost (a third
/// of the instructions spent reading a decision request).
std::size_t parsePlainRequest(std::string_view data, const PlainLimits& limits, Request& request,
                              unsigned& version, bool& keep_alive);

}  // namespace sluice::http
