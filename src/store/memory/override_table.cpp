#include "store/memory/override_table.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sluice::memory_detail {
namespace {

constexpr std::string_view kFormat = "sluice-overrides 1";

Error fileError(const std::string& path, const std::string& why) {
  return makeError(ErrorKind::kInvalidArgument, path + ": " + why);
}

std::string errnoText() { return std::strerror(errno); }

/// Writes `text` to `path` so that a crash leaves either the old file or the new one:
/// a temporary beside it, fsync, rename, then fsync of the directory.
Status writeAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fileError(temporary, errnoText());
  }
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const std::string why = errnoText();
      ::close(fd);
      return fileError(temporary, why);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return fileError(temporary, errnoText());
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return fileError(path, errnoText());
  }
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace

std::string OverrideTable::keyOf(const OverrideSlot& slot) {
  std::string key = slot.tag;
  key += '\x1f';
  key += slot.field;
  return key;
}

Status OverrideTable::load() {
  if (path_.empty()) {
    return {};
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) {
      return {};
    }
    return fileError(path_, errnoText());
  }
  std::stringstream text;
  text << in.rdbuf();
  Map loaded;
  try {
    const nlohmann::json doc = nlohmann::json::parse(text.str());
    if (!doc.is_object() || doc.value("format", "") != kFormat || !doc.contains("overrides") ||
        !doc["overrides"].is_array()) {
      return fileError(path_, "not an overrides file (expected {\"format\": \"" +
                                  std::string(kFormat) + "\", \"overrides\": [...]})");
    }
    std::size_t index = 0;
    for (const nlohmann::json& item : doc["overrides"]) {
      const std::string where = "overrides[" + std::to_string(index++) + "]: ";
      if (!item.is_object() || !item.contains("tag") || !item.contains("field") ||
          !item.contains("value") || !item["tag"].is_string() || !item["field"].is_string() ||
          !item["value"].is_string()) {
        return fileError(path_, where + "expected {\"tag\", \"field\", \"value\"} strings");
      }
      auto value = decodeOverride(item["value"].get<std::string>());
      if (!value) {
        return fileError(path_, where + value.error().message);
      }
      OverrideEntry entry{{item["tag"].get<std::string>(), item["field"].get<std::string>()},
                          std::make_shared<const StoredOverride>(std::move(*value))};
      std::string key = keyOf(entry.slot);
      loaded.insert_or_assign(std::move(key), std::move(entry));
    }
  } catch (const nlohmann::json::exception& e) {
    return fileError(path_, std::string("not JSON: ") + e.what());
  }
  std::unique_lock lock(mutex_);
  entries_ = std::move(loaded);
  count_.store(entries_.size(), std::memory_order_relaxed);
  return {};
}

StoredOverridePtr OverrideTable::find(std::string_view tag, std::string_view bucket_field,
                                      std::string_view rule_field, Micros now) const {
  thread_local std::string key;
  std::shared_lock lock(mutex_);
  for (const std::string_view field : {bucket_field, rule_field}) {
    if (field.empty()) {
      continue;
    }
    key.assign(tag);
    key += '\x1f';
    key += field;
    const auto it = entries_.find(key);
    if (it != entries_.end() && !it->second.value->expired(now)) {
      return it->second.value;
    }
  }
  return nullptr;
}

Result<bool> OverrideTable::set(const OverrideSlot& slot, StoredOverridePtr value,
                                std::size_t max) {
  std::lock_guard writer(write_mutex_);
  Map next;
  {
    std::shared_lock lock(mutex_);
    next = entries_;
  }
  std::string key = keyOf(slot);
  const bool replaced = next.count(key) != 0;
  if (!replaced && next.size() >= max) {
    return makeError(ErrorKind::kInvalidArgument,
                     "too many overrides: " + std::to_string(next.size()) +
                         " are set, the most --max-overrides allows (remove one first)");
  }
  next.insert_or_assign(std::move(key), OverrideEntry{slot, std::move(value)});
  if (auto saved = save(next); !saved) {
    return saved.error();
  }
  std::unique_lock lock(mutex_);
  entries_ = std::move(next);
  count_.store(entries_.size(), std::memory_order_relaxed);
  return replaced;
}

Result<bool> OverrideTable::remove(const OverrideSlot& slot) {
  std::lock_guard writer(write_mutex_);
  Map next;
  {
    std::shared_lock lock(mutex_);
    next = entries_;
  }
  if (next.erase(keyOf(slot)) == 0) {
    return false;
  }
  if (auto saved = save(next); !saved) {
    return saved.error();
  }
  std::unique_lock lock(mutex_);
  entries_ = std::move(next);
  count_.store(entries_.size(), std::memory_order_relaxed);
  return true;
}

std::vector<OverrideEntry> OverrideTable::list() const {
  std::shared_lock lock(mutex_);
  std::vector<OverrideEntry> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) {
    out.push_back(entry);
  }
  return out;
}

Status OverrideTable::save(const Map& entries) const {
  if (path_.empty()) {
    return {};
  }
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [key, entry] : entries) {
    items.push_back({{"tag", entry.slot.tag},
                     {"field", entry.slot.field},
                     {"value", encodeOverride(*entry.value)}});
  }
  nlohmann::json doc = {{"format", kFormat}, {"overrides", std::move(items)}};
  return writeAtomically(path_,
                         doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace sluice::memory_detail
