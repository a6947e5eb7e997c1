#include "http/request_parser.hpp"

#include <algorithm>
#include <boost/beast/http/rfc7230.hpp>
#include <limits>

#include "sluice/common/ascii.hpp"

namespace sluice::http {

namespace bhttp = boost::beast::http;

RequestParser::RequestParser(Request& request) : request_(request) {
  request_.method.clear();
  request_.target.clear();
  request_.body.clear();
  request_.clearHeaders();
}

bool keepAlive(const Request& request, unsigned version) {
  for (const RequestHeader& header : request.headers) {
    if (equalsIgnoreCase(header.name, "Connection")) {
      if (version < 11) {
        return bhttp::token_list{header.value}.exists("keep-alive");
      }
      return !bhttp::token_list{header.value}.exists("close");
    }
  }
  return version >= 11;
}

void RequestParser::on_request_impl(bhttp::verb, string_view method_string, string_view target,
                                    int version, error_code&) {
  // Beast's message keeps the verb and spells a known one as it was sent (verbs are
  // case-sensitive): the text as sent is the same.
  request_.method.assign(method_string);
  request_.target.assign(target);
  version_ = static_cast<unsigned>(version);
}

void RequestParser::on_response_impl(int, string_view, int, error_code&) {}

void RequestParser::on_field_impl(bhttp::field, string_view name_string, string_view value,
                                  error_code&) {
  request_.addHeader(name_string, value);
}

void RequestParser::on_header_impl(error_code& ec) { ec = {}; }

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                      error_code& ec) {
  // As beast::http::basic_string_body's reader; the body limit was checked by the parser.
  if (content_length) {
    request_.body.reserve(static_cast<std::size_t>(
        std::min<std::uint64_t>(*content_length, std::numeric_limits<std::size_t>::max())));
  }
  ec = {};
}

std::size_t RequestParser::on_body_impl(string_view body, error_code& ec) {
  request_.body.append(body);
  ec = {};
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t, string_view, error_code&) {}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code& ec) {
  request_.body.append(body);
  ec = {};
  return body.size();
}

void RequestParser::on_finish_impl(error_code& ec) { ec = {}; }

}  // namespace sluice::http
