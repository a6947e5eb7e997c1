#include "grpc/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/verify_context.hpp>
#include <cstring>

namespace sluice::grpc {
namespace {

namespace ssl = boost::asio::ssl;

/// OpenSSL's reason for the last failure, and its queue emptied.
std::string openSslReason() {
  std::string reason;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    reason = text;  // the last one is the most specific
  }
  return reason.empty() ? "unknown OpenSSL error" : reason;
}

Error fileError(const char* flag, const std::string& path, const std::string& what) {
  return makeError(ErrorKind::kInvalidArgument, std::string(flag) + " " + path + ": " + what);
}

/// Whether `file` is readable at all: a clearer reason than OpenSSL's for a missing file.
std::string unreadable(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return std::strerror(errno);
  }
  std::fclose(file);
  return {};
}

/// A SAN of the leaf certificate (DNS, URI, e-mail or IP address as text) equal to `san`.
bool hasSan(X509* cert, const std::string& san) {
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) {
    return false;
  }
  bool found = false;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && !found; ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS || name->type == GEN_URI || name->type == GEN_EMAIL) {
      const ASN1_STRING* text = name->d.ia5;
      found = san == std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                                      static_cast<std::size_t>(ASN1_STRING_length(text)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.ip;
      char text[64] = {};
      const int length = ASN1_STRING_length(ip);
      const unsigned char* bytes = ASN1_STRING_get0_data(ip);
      if (length == 4) {
        std::snprintf(text, sizeof(text), "%u.%u.%u.%u", bytes[0], bytes[1], bytes[2], bytes[3]);
        found = san == text;
      }
    }
  }
  GENERAL_NAMES_free(names);
  return found;
}

int selectH2(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_length,
             const unsigned char* in, unsigned int in_length, void* /*arg*/) {
  static constexpr unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_length, kH2, sizeof(kH2), in, in_length) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  // A client that offers ALPN without h2 cannot speak gRPC.
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> makeServerTlsContext(const TlsFiles& files) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (auto why = unreadable(files.cert_file); !why.empty()) {
    return fileError("--grpc-tls-cert", files.cert_file, "cannot read: " + why);
  }
  if (SSL_CTX_use_certificate_chain_file(native, files.cert_file.c_str()) != 1) {
    return fileError("--grpc-tls-cert", files.cert_file,
                     "not a PEM certificate chain: " + openSslReason());
  }
  if (auto why = unreadable(files.key_file); !why.empty()) {
    return fileError("--grpc-tls-key", files.key_file, "cannot read: " + why);
  }
  if (SSL_CTX_use_PrivateKey_file(native, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string reason = openSslReason();
    return fileError("--grpc-tls-key", files.key_file,
                     reason.find("mismatch") != std::string::npos
                         ? "does not match the certificate of " + files.cert_file + ": " + reason
                         : "not a PEM private key: " + reason);
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return fileError(
        "--grpc-tls-key", files.key_file,
        "does not match the certificate of " + files.cert_file + ": " + openSslReason());
  }
  if (!files.client_ca_file.empty()) {
    if (auto why = unreadable(files.client_ca_file); !why.empty()) {
      return fileError("--grpc-tls-client-ca", files.client_ca_file, "cannot read: " + why);
    }
    if (SSL_CTX_load_verify_locations(native, files.client_ca_file.c_str(), nullptr) != 1) {
      return fileError("--grpc-tls-client-ca", files.client_ca_file,
                       "not a PEM CA certificate: " + openSslReason());
    }
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    if (!files.client_san.empty()) {
      context->set_verify_callback(
          [san = files.client_san](bool preverified, ssl::verify_context& verify) {
            X509_STORE_CTX* store = verify.native_handle();
            if (!preverified || X509_STORE_CTX_get_error_depth(store) > 0) {
              return preverified;
            }
            return hasSan(X509_STORE_CTX_get_current_cert(store), san);
          });
    }
  } else if (!files.client_san.empty()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "--grpc-tls-client-san needs --grpc-tls-client-ca (the CA that signs the "
                     "client certificates)");
  }
  SSL_CTX_set_alpn_select_cb(native, selectH2, nullptr);
  return context;
}

std::string tlsFilesStamp(const TlsFiles& files) {
  std::string stamp;
  for (const std::string* path : {&files.cert_file, &files.key_file, &files.client_ca_file}) {
    struct stat info {};
    if (!path->empty() && ::stat(path->c_str(), &info) == 0) {
      stamp += std::to_string(info.st_ino) + ":" + std::to_string(info.st_size) + ":" +
               std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec) +
               ";";
    } else {
      stamp += "-;";
    }
  }
  return stamp;
}

}  // namespace sluice::grpc
