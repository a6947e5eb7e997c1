#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "sluice/common/result.hpp"

namespace boost::asio::ssl {
class context;
}

/// TLS for the gRPC listener: the server's certificate and key, and optionally the CA every
/// client certificate must be signed by and a SAN it must carry (mutual TLS).
namespace sluice::grpc {

struct TlsFiles {
  std::string cert_file;       ///< PEM certificate chain, leaf first
  std::string key_file;        ///< PEM private key of the leaf
  std::string client_ca_file;  ///< empty: clients are not asked for a certificate
  std::string client_san;      ///< empty: any certificate signed by the CA; else a SAN equal to it
};

/// A server context from the files: TLS 1.2 and 1.3, ALPN `h2`, client certificates required
/// and verified when client_ca_file is set. Errors (kInvalidArgument) name the file and the
/// reason (OpenSSL's): unreadable, not PEM, a key that does not match the certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> makeServerTlsContext(const TlsFiles& files);

/// A fingerprint of the files' state (inode, size, modification time), to see that one of
/// them changed (a rotation writes new files or renames new ones into place).
std::string tlsFilesStamp(const TlsFiles& files);

}  // namespace sluice::grpc
