#pragma once

#include <cstddef>
#include <string>

#include "sluice/http/message.hpp"

/// The HTTP/1.1 response serializer of the sessions: Responses become bytes on the wire
/// without Beast's message types, appended to one buffer per write.
namespace sluice::http {

/// Appends `response` to `out` in the HTTP/1.x wire format, as Beast would write it: the
/// status line (`HTTP/1.0` when `version` is 10, else `HTTP/1.1`) with the reason phrase,
/// `Server: sluice`, `Content-Type`, the response's `headers`, its `header_lines` as given,
/// `Connection` when it differs from the version's default (`close` on 1.1 when
/// !keep_alive, `keep-alive` on 1.0 when keep_alive), then `Content-Length` and the body
/// unless the status has no body (1xx, 204, 304). CR and LF never reach the wire inside a
/// header name or value (or the content type): they are dropped.
void writeResponse(std::string& out, const Response& response, unsigned version, bool keep_alive);

/// writeResponse() from `at` in `out`, whose bytes from `at` on are free to overwrite:
/// `out` grows when it is too short for the answer, and is not trimmed after it. Returns
/// where the answer ends. A buffer that keeps its size from write to write (the session's)
/// is then not filled with zeros up to the room of each answer before it is written.
std::size_t writeResponseAt(std::string& out, std::size_t at, const Response& response,
                            unsigned version, bool keep_alive);

}  // namespace sluice::http
