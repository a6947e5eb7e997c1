#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstddef>
#include <cstdint>

#include "sluice/http/message.hpp"

namespace sluice::http {

/// The keep-alive semantics of beast::http::message::keep_alive() for a request of HTTP
/// version `version` (10, 11): the first `Connection` field decides (HTTP/1.1: not `close`;
/// HTTP/1.0: `keep-alive`), else the version.
bool keepAlive(const Request& request, unsigned version);

/// Beast's HTTP/1 request parser (basic_parser: the grammar, limits and errors of
/// beast::http::request_parser) writing straight into a Request: the method, target, header
/// fields (addHeader()) and body land in the Request's strings, which keep their capacity
/// from one request of a connection to the next, instead of in a Beast message that is then
/// copied.
/// One parser per request, as with Beast's (construct a new one for the next request).
class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  /// Fills `request`'s method, target, headers and body (not path or peer), emptied here.
  explicit RequestParser(Request& request);

  /// The request line's HTTP version (10, 11); 11 before it is read, as a Beast message.
  unsigned version() const { return version_; }

  /// keepAlive() of the request read.
  bool keepAlive() const { return http::keepAlive(request_, version_); }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb method, string_view method_string,
                       string_view target, int version, error_code& ec) override;
  void on_response_impl(int code, string_view reason, int version, error_code& ec) override;
  void on_field_impl(boost::beast::http::field name, string_view name_string, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         error_code& ec) override;
  std::size_t on_body_impl(string_view body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, string_view extensions, error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, string_view body, error_code& ec) override;
  void on_finish_impl(error_code& ec) override;

  Request& request_;
  unsigned version_ = 11;
};

}  // namespace sluice::http
