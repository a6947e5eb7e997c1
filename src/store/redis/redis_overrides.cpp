#include "store/redis/redis_overrides.hpp"

#include <charconv>
#include <utility>

#include "sluice/rules/bucket_key.hpp"

namespace sluice::redis {
namespace {

constexpr char kIndexSeparator = '\x1f';

std::string indexField(const OverrideSlot& slot) { return slot.tag + kIndexSeparator + slot.field; }

Error protocol(const std::string& why) { return makeError(ErrorKind::kScript, "override: " + why); }

}  // namespace

std::string overrideHashKey(std::string_view redis_prefix, std::string_view tag) {
  std::string key(redis_prefix);
  key += ":{";
  key += tag;
  key += "}#o";
  return key;
}

std::string overrideIndexKey(std::string_view redis_prefix) {
  return std::string(redis_prefix) + ":overrides";
}

void setOverrideIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                   const OverrideSlot& slot, const StoredOverride& value, std::size_t max_overrides,
                   std::chrono::milliseconds timeout, OverrideSetCallback done) {
  std::string text = encodeOverride(value);
  std::vector<std::string> args = {"override", "set-index", indexField(slot), text,
                                   std::to_string(max_overrides)};
  auto then = [backend, hash = overrideHashKey(redis_prefix, slot.tag), field = slot.field, text,
               timeout, done = std::move(done)](Result<Reply> indexed) mutable {
    if (!indexed) {
      // The script's refusal of one more override than --max-overrides is the caller's.
      const std::string& message = indexed.error().message;
      const std::size_t at = message.find("too many overrides");
      done(at == std::string::npos ? indexed.error()
                                   : makeError(ErrorKind::kInvalidArgument, message.substr(at)));
      return;
    }
    const bool replaced = indexed->type == Reply::Type::kInteger && indexed->integer == 1;
    backend->evalScript({hash}, {"override", "set", field, text}, timeout,
                        [replaced, done = std::move(done)](Result<Reply> set) {
                          if (!set) {
                            done(set.error());
                            return;
                          }
                          done(replaced);
                        });
  };
  backend->evalScript({overrideIndexKey(redis_prefix)}, std::move(args), timeout, std::move(then));
}

void removeOverrideIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                      const OverrideSlot& slot, std::chrono::milliseconds timeout,
                      OverrideRemoveCallback done) {
  auto then = [backend, index = overrideIndexKey(redis_prefix), field = indexField(slot), timeout,
               done = std::move(done)](Result<Reply> removed) mutable {
    if (!removed) {
      done(removed.error());
      return;
    }
    const bool was_there = removed->type == Reply::Type::kInteger && removed->integer == 1;
    backend->evalScript(
        {index}, {"override", "del", field}, timeout,
        [was_there, done = std::move(done)](Result<Reply> unindexed) {
          if (!unindexed) {
            done(unindexed.error());
            return;
          }
          done(was_there || (unindexed->type == Reply::Type::kInteger && unindexed->integer == 1));
        });
  };
  backend->evalScript({overrideHashKey(redis_prefix, slot.tag)}, {"override", "del", slot.field},
                      timeout, std::move(then));
}

void listOverridesIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                     std::chrono::milliseconds timeout, OverrideListCallback done) {
  backend->evalScript(
      {overrideIndexKey(redis_prefix)}, {"override", "list"}, timeout,
      [done = std::move(done)](Result<Reply> listed) {
        if (!listed) {
          done(listed.error());
          return;
        }
        if (listed->type != Reply::Type::kArray || listed->elements.size() % 2 != 0) {
          done(protocol("the index is not a hash"));
          return;
        }
        std::vector<OverrideEntry> out;
        for (std::size_t i = 0; i + 1 < listed->elements.size(); i += 2) {
          const std::string& field = listed->elements[i].str;
          const std::size_t separator = field.find(kIndexSeparator);
          auto value = decodeOverride(listed->elements[i + 1].str);
          if (separator == std::string::npos || !value) {
            continue;
          }
          out.push_back({{field.substr(0, separator), field.substr(separator + 1)},
                         std::make_shared<const StoredOverride>(std::move(*value))});
        }
        done(std::move(out));
      });
}

void appendOverrideFields(const StoreRequest& request, std::size_t values_per_limit,
                          std::int64_t flag, std::vector<std::string>& args) {
  for (std::size_t i = 0; i < request.limits.size(); ++i) {
    const StoreLimit& limit = request.limits[i];
    if (limit.override_rule == nullptr || limit.params.algorithm == Algorithm::kSketch) {
      continue;
    }
    args.push_back(overrideRuleField(*limit.override_rule));
    // args[k] is ARGV[k + 1]: the field just added is ARGV[args.size()].
    std::string& flags = args[1 + i * values_per_limit + 5];
    flags = std::to_string(std::stoll(flags) + flag * static_cast<std::int64_t>(args.size()));
  }
}

bool readAppliedOverrides(const Reply& element, std::size_t limits,
                          std::vector<AppliedOverride>& out) {
  if (element.type != Reply::Type::kArray || element.elements.size() % 2 != 0) {
    return false;
  }
  for (std::size_t j = 0; j + 1 < element.elements.size(); j += 2) {
    const Reply& index = element.elements[j];
    const Reply& text = element.elements[j + 1];
    if (index.type != Reply::Type::kInteger || index.integer < 1 ||
        static_cast<std::size_t>(index.integer) > limits || text.type != Reply::Type::kString) {
      return false;
    }
    auto value = decodeOverride(text.str);
    if (!value) {
      return false;
    }
    out.push_back({static_cast<std::size_t>(index.integer - 1),
                   std::make_shared<const StoredOverride>(std::move(*value))});
  }
  return true;
}

}  // namespace sluice::redis
