#include "sluice/rules/bucket_key.hpp"

#include <array>

namespace sluice {
namespace {

/// Bytes a key part keeps as they are (A-Z a-z 0-9 _ . -); a table, as every decision
/// escapes its domain, entries and client.
constexpr auto kKeySafe = [] {
  std::array<bool, 256> table{};
  for (std::size_t c = 0; c < table.size(); ++c) {
    table[c] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
  }
  return table;
}();

/// The length of the run of safe bytes `part` starts with: four bytes a test (their table
/// entries and-ed, one branch) while four are left, then one at a time.
std::size_t safeRun(std::string_view part) {
  const auto* p = reinterpret_cast<const unsigned char*>(part.data());
  const std::size_t n = part.size();
  std::size_t i = 0;
  while (n - i >= 4 &&
         (kKeySafe[p[i]] & kKeySafe[p[i + 1]] & kKeySafe[p[i + 2]] & kKeySafe[p[i + 3]])) {
    i += 4;
  }
  while (i < n && kKeySafe[p[i]]) {
    ++i;
  }
  return i;
}

/// Where the domain of a bucket (or of a store key's bucket) ends: at its first ':' or ';'.
std::size_t domainEnd(std::string_view bucket) {
  const std::size_t end = bucket.find_first_of(":;");
  return end == std::string_view::npos ? bucket.size() : end;
}

}  // namespace

void appendEscapedKeyPart(std::string& out, std::string_view part) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  // Key parts are usually all safe: one append of the whole run, not one test and branch
  // per byte around appends of the runs.
  for (;;) {
    const std::size_t safe = safeRun(part);
    out.append(part.data(), safe);
    if (safe == part.size()) {
      return;
    }
    const auto c = static_cast<unsigned char>(part[safe]);
    const char escaped[3] = {'%', kHex[c >> 4], kHex[c & 0x0F]};
    out.append(escaped, sizeof escaped);
    part.remove_prefix(safe + 1);
  }
}

std::string escapeKeyPart(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  appendEscapedKeyPart(out, part);
  return out;
}

void BucketKey::appendDomain(std::string& bucket, std::string_view domain) {
  appendEscapedKeyPart(bucket, domain);
}

void BucketKey::appendEntry(std::string& bucket, std::string_view key, std::string_view value) {
  bucket += ':';
  appendEscapedKeyPart(bucket, key);
  bucket += '=';
  appendEscapedKeyPart(bucket, value);
}

void BucketKey::appendSharedEntry(std::string& bucket, std::string_view key,
                                  std::string_view pattern) {
  bucket += ':';
  appendEscapedKeyPart(bucket, key);
  bucket += '~';
  appendEscapedKeyPart(bucket, pattern);
}

void BucketKey::appendLimit(std::string& bucket, std::string_view limit_id, Algorithm algorithm) {
  bucket += ';';
  bucket += limit_id;
  bucket += ';';
  bucket += algorithmCode(algorithm);
}

std::string BucketKey::limitId(bool explicit_name, std::string_view name, std::size_t index,
                               bool candidate) {
  std::string id = candidate ? "c" : "";
  id += explicit_name ? "n" + escapeKeyPart(name) : "i" + std::to_string(index);
  return id;
}

std::string BucketKey::storeKey(std::string_view client, std::string_view bucket) {
  std::string key;
  key.reserve(client.size() + 1 + bucket.size());
  assignStoreKey(key, client, bucket);
  return key;
}

void BucketKey::assignStoreKey(std::string& key, std::string_view client, std::string_view bucket) {
  key.clear();
  appendEscapedKeyPart(key, client);
  key += '|';
  key += bucket;
}

std::vector<std::string> BucketKey::domainPrefixes(std::string_view client,
                                                   std::string_view domain) {
  std::string bucket;
  appendDomain(bucket, domain);
  std::string prefix = storeKey(client, bucket);
  return {prefix + ':', prefix + ';'};
}

std::string BucketKey::redisPrefix(std::string_view configured) {
  std::string out;
  out.reserve(configured.size());
  for (char ch : configured) {
    if (ch == '{') {
      out += "%7B";
    } else if (ch == '}') {
      out += "%7D";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string_view BucketKey::hashTag(std::string_view store_key) {
  const std::size_t bar = store_key.find('|');
  const std::size_t bucket_start = bar == std::string_view::npos ? 0 : bar + 1;
  return store_key.substr(0, bucket_start + domainEnd(store_key.substr(bucket_start)));
}

std::string BucketKey::redisKey(std::string_view redis_prefix, std::string_view store_key) {
  std::string key;
  assignRedisKey(key, redis_prefix, store_key);
  return key;
}

void BucketKey::assignRedisKey(std::string& key, std::string_view redis_prefix,
                               std::string_view store_key) {
  const bool has_bar = store_key.find('|') != std::string_view::npos;
  const std::string_view tag = hashTag(store_key);
  key.clear();
  key.reserve(redis_prefix.size() + store_key.size() + 5);
  key.append(redis_prefix);
  key += ":{";
  if (!has_bar) {
    key += '|';
  }
  key.append(tag);
  key += '}';
  key.append(store_key.substr(tag.size()));
}

}  // namespace sluice
