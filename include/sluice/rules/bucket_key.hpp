#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/limiter/limiter.hpp"

namespace sluice {

/// The one owner of the key grammar (docs/architecture.md, "Key layout"). Every part is
/// escaped (bytes outside [A-Za-z0-9_.-] become %XX), so the separators ':', '=', '~',
/// ';', '|', '{' and '}' never occur inside a part and distinct identities never share a
/// key:
///
///     bucket    = domain *( ":" key "=" value / ":" key "~" pattern ) ";" limit-id ";" algo
///     store key = client "|" bucket                      (StoreLimit::key, the memory store)
///     redis key = prefix ":{" client "|" domain "}" rest (rest: the bucket after its domain)
///
/// The matcher builds buckets (MatchedLimit::bucket_key); the decision service turns a
/// bucket and the request's client into a store key; the Redis stores turn a store key
/// into a Redis key whose hash tag `{client|domain}` puts every key of one request in one
/// cluster slot; the admin reset builds store-key prefixes. The client id appears once.
class BucketKey {
 public:
  // --- The bucket (what the matcher produces) ---------------------------------------------

  /// Starts a bucket: the escaped domain.
  static void appendDomain(std::string& bucket, std::string_view domain);
  /// One descriptor entry counted per value: ":" key "=" value.
  static void appendEntry(std::string& bucket, std::string_view key, std::string_view value);
  /// One wildcard entry whose values share a counter (share_threshold): ":" key "~" pattern.
  static void appendSharedEntry(std::string& bucket, std::string_view key,
                                std::string_view pattern);
  /// Ends a bucket: ";" limit-id ";" algorithm code.
  static void appendLimit(std::string& bucket, std::string_view limit_id, Algorithm algorithm);
  /// The identity of a limit within its node (RateLimit::limit_id): "n" + the escaped name
  /// for an explicitly named limit, "i<index>" otherwise, and a leading "c" for a candidate
  /// (its own buckets, never the live limit's). Counters survive a reload while domain,
  /// node path, limit id and algorithm stay the same.
  static std::string limitId(bool explicit_name, std::string_view name, std::size_t index,
                             bool candidate = false);

  // --- The store key ----------------------------------------------------------------------

  /// client "|" bucket, the client escaped ("" when the request has none).
  static std::string storeKey(std::string_view client, std::string_view bucket);
  /// storeKey(client, bucket) written into `key` (replacing its content, keeping its
  /// capacity).
  static void assignStoreKey(std::string& key, std::string_view client, std::string_view bucket);
  /// The store-key prefixes of every bucket of `domain` for `client`: its descriptor
  /// buckets ("client|domain:") and its domain-level bucket ("client|domain;").
  static std::vector<std::string> domainPrefixes(std::string_view client, std::string_view domain);

  // --- The Redis key ----------------------------------------------------------------------

  /// The configured key prefix with '{' and '}' replaced by %7B / %7D, so that the only
  /// braces of a Redis key are its hash tag's.
  static std::string redisPrefix(std::string_view configured);
  /// The Redis key of a store key (or of a store-key prefix, for the admin reset):
  /// `redis_prefix` (already redisPrefix()) ":{" client "|" domain "}" rest. A store key
  /// without '|' (only hand-made ones) counts as one without client.
  static std::string redisKey(std::string_view redis_prefix, std::string_view store_key);
  /// redisKey() written into `key`, whose capacity is reused (no allocation once warm).
  static void assignRedisKey(std::string& key, std::string_view redis_prefix,
                             std::string_view store_key);
  /// The hash tag of a store key: client "|" domain.
  static std::string_view hashTag(std::string_view store_key);
};

/// Escapes one part of a key (see BucketKey): bytes outside [A-Za-z0-9_.-] become %XX.
std::string escapeKeyPart(std::string_view part);
/// escapeKeyPart(part) appended to `out`.
void appendEscapedKeyPart(std::string& out, std::string_view part);

}  // namespace sluice
