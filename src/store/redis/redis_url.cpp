#include <charconv>
#include <string>
#include <string_view>

#include "sluice/common/hex.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {
namespace {

Error urlError(const std::string& url, const std::string& what) {
  return makeError(ErrorKind::kInvalidArgument, "invalid Redis URL '" + url + "': " + what);
}

// Percent-decodes user info and paths (a password may contain '@', ':' or '/').
bool percentDecode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) {
      return false;
    }
    int hi = hexValue(in[i + 1]);
    int lo = hexValue(in[i + 2]);
    if (hi < 0 || lo < 0) {
      return false;
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool parseInt(std::string_view text, int& out) {
  if (text.empty()) {
    return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "user:password", ":password" or "password"-less "user" (user info before '@').
Status parseUserInfo(const std::string& url, std::string_view info, RedisOptions& out) {
  auto colon = info.find(':');
  std::string_view user = colon == std::string_view::npos ? info : info.substr(0, colon);
  std::string_view password = colon == std::string_view::npos ? "" : info.substr(colon + 1);
  if (colon == std::string_view::npos) {
    // redis://secret@host is the common legacy spelling for a password without user.
    password = user;
    user = "";
  }
  if (!percentDecode(user, out.user) || !percentDecode(password, out.password)) {
    return urlError(url, "bad percent-encoding in user info");
  }
  return {};
}

Status parseDbQuery(const std::string& url, std::string_view query, RedisOptions& out) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    auto eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (key == "db") {
      if (!parseInt(value, out.db) || out.db < 0) {
        return urlError(url, "db must be a non-negative integer");
      }
    } else {
      return urlError(url, "unknown query parameter '" + std::string(key) + "'");
    }
  }
  return {};
}

/// The rest of a unix:///path URL: no host, a socket path, the database in the query.
Status parseUnixPart(const std::string& url, std::string_view authority, std::string_view path,
                     std::string_view query, RedisOptions& out) {
  if (!authority.empty() && authority != "localhost") {
    return urlError(url, "a unix URL has no host: unix:///path/to/redis.sock");
  }
  if (path.empty() || path == "/") {
    return urlError(url, "missing socket path");
  }
  if (!percentDecode(path, out.unix_path)) {
    return urlError(url, "bad percent-encoding in the socket path");
  }
  return parseDbQuery(url, query, out);
}

/// host[:port] or [IPv6][:port] (default port 6379).
Status parseHostPort(const std::string& url, std::string_view authority, RedisOptions& out) {
  std::string_view host = authority;
  std::string_view port;
  if (host.starts_with('[')) {  // [IPv6]:port
    auto close = host.find(']');
    if (close == std::string_view::npos) {
      return urlError(url, "unterminated IPv6 address");
    }
    std::string_view after = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return urlError(url, "expected ':' after the IPv6 address");
      }
      port = after.substr(1);
    }
  } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) {
    return urlError(url, "missing host");
  }
  out.host = std::string(host);
  out.port = 6379;
  if (!port.empty() && (!parseInt(port, out.port) || out.port <= 0 || out.port > 65535)) {
    return urlError(url, "port must be 1..65535");
  }
  return {};
}

}  // namespace

Result<RedisOptions> parseRedisUrl(const std::string& url, RedisOptions base) {
  RedisOptions out = std::move(base);
  out.user.clear();
  out.password.clear();
  out.unix_path.clear();
  out.db = 0;
  std::string_view rest(url);
  auto scheme_end = rest.find("://");
  if (scheme_end == std::string_view::npos) {
    return urlError(url, "expected redis://[user:password@]host[:port][/db] or unix:///path");
  }
  std::string_view scheme = rest.substr(0, scheme_end);
  rest.remove_prefix(scheme_end + 3);

  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // User info ends at the last '@' before the path (passwords may contain '@' when
  // percent-encoded only; a raw '@' in the host part is not valid anyway).
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view path = rest.substr(authority.size());
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    if (Status s = parseUserInfo(url, authority.substr(0, at), out); !s) {
      return s.error();
    }
    authority.remove_prefix(at + 1);
  }

  if (scheme == "unix" || scheme == "redis+unix") {
    if (Status s = parseUnixPart(url, authority, path, query, out); !s) {
      return s.error();
    }
    return out;
  }
  if (scheme == "rediss") {
    return urlError(url, "TLS (rediss://) is not supported");
  }
  if (scheme != "redis") {
    return urlError(url, "unknown scheme '" + std::string(scheme) + "' (use redis:// or unix://)");
  }

  if (Status s = parseHostPort(url, authority, out); !s) {
    return s.error();
  }
  if (path.size() > 1) {
    if (!parseInt(path.substr(1), out.db) || out.db < 0) {
      return urlError(url, "the path must be a database number (/0, /1, ...)");
    }
  }
  if (Status s = parseDbQuery(url, query, out); !s) {
    return s.error();
  }
  return out;
}

Result<std::vector<RedisOptions>> parseRedisClusterUrls(const std::string& urls, RedisOptions base,
                                                        char separator) {
  std::vector<RedisOptions> seeds;
  std::size_t start = 0;
  while (start <= urls.size()) {
    std::size_t comma = urls.find(separator, start);
    if (comma == std::string::npos) {
      comma = urls.size();
    }
    const std::string url = urls.substr(start, comma - start);
    start = comma + 1;
    const std::string where = "seed " + std::to_string(seeds.size() + 1) + " ('" + url + "'): ";
    auto parsed = parseRedisUrl(url, base);
    if (!parsed) {
      return makeError(ErrorKind::kInvalidArgument, where + parsed.error().message);
    }
    if (!parsed->unix_path.empty()) {
      return makeError(ErrorKind::kInvalidArgument,
                       where + "a cluster is reached over TCP (redis://host:port)");
    }
    if (parsed->db != 0) {
      return makeError(ErrorKind::kInvalidArgument, where + "Redis Cluster has database 0 only");
    }
    if (!seeds.empty() &&
        (parsed->user != seeds.front().user || parsed->password != seeds.front().password)) {
      return makeError(ErrorKind::kInvalidArgument,
                       where + "every seed must have the same user and password");
    }
    seeds.push_back(std::move(*parsed));
  }
  return seeds;
}

}  // namespace sluice
