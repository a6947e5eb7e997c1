// HPACK decoding (RFC 7541) of the header blocks a gRPC client sends, and the few encoding
// helpers our responses need. The Huffman code is in hpack_huffman.cpp.
#include "grpc/hpack.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>

namespace sluice::grpc {
namespace {

struct StaticEntry {
  std::string_view name;
  std::string_view value;
};

// Declarative table: RFC 7541 Appendix A, by index (0 unused).
constexpr std::array<StaticEntry, hpack::kStaticEntries + 1> kStaticTable = {{
    {"", ""},
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
}};

/// What an entry costs beyond its bytes (RFC 7541 section 4.1).
constexpr std::size_t kEntryOverhead = 32;
/// Continuation bytes of an integer: 5 carry 35 bits, more than the 32 we accept, so a sixth
/// can only be padding (0x80 ...) meant to make us loop.
constexpr unsigned kMaxContinuationBytes = 5;

std::size_t clampTableBytes(std::size_t bytes) {
  return std::min<std::size_t>(bytes, std::numeric_limits<std::uint32_t>::max());
}

}  // namespace

HpackDecoder::HpackDecoder(std::size_t max_table_bytes)
    : max_table_bytes_(clampTableBytes(max_table_bytes)),
      table_limit_(max_table_bytes_),
      ring_(new char[std::max<std::size_t>(max_table_bytes_, 1)]),
      entries_(max_table_bytes_ / kEntryOverhead + 1) {
  scratch_.resize(256);
}

bool HpackDecoder::fail(std::size_t offset, std::string_view what) {
  failed_ = true;
  error_ = "byte " + std::to_string(offset) + ": ";
  error_.append(what);
  return false;
}

bool HpackDecoder::failIndex(std::size_t offset, std::uint32_t index) {
  return fail(offset, "index " + std::to_string(index) + " beyond the tables (61 static, " +
                          std::to_string(count_) + " dynamic)");
}

bool HpackDecoder::failStringSize(std::size_t offset, std::uint32_t size, std::size_t left) {
  return fail(offset, "a string of " + std::to_string(size) + " bytes where the block has " +
                          std::to_string(left));
}

bool HpackDecoder::failTableSize(std::size_t offset, std::uint32_t size) {
  return fail(offset, "a dynamic table size update to " + std::to_string(size) +
                          " bytes, over the " + std::to_string(max_table_bytes_) +
                          " of SETTINGS_HEADER_TABLE_SIZE");
}

bool HpackDecoder::decode(std::string_view block, FieldSink sink, void* user) {
  if (failed_) {
    return false;  // the table may be out of step with the peer's: nothing after is valid
  }
  std::size_t pos = 0;
  bool field_seen = false;
  while (pos < block.size()) {
    const auto first = static_cast<std::uint8_t>(block[pos]);
    bool ok;
    if ((first & 0x80) != 0) {  // 6.1 indexed field
      ok = indexedField(block, pos, sink, user);
    } else if ((first & 0x40) != 0) {  // 6.2.1 literal with incremental indexing
      ok = literalField(block, pos, 6, true, sink, user);
    } else if ((first & 0x20) != 0) {  // 6.3 dynamic table size update
      // Section 4.2: only at the beginning of a block, where the encoder acts on a change
      // of SETTINGS_HEADER_TABLE_SIZE before the fields that depend on it.
      if (field_seen) {
        return fail(pos, "dynamic table size update after a field");
      }
      if (!sizeUpdate(block, pos)) {
        return false;
      }
      continue;
    } else {  // 6.2.2 without indexing (0x00), 6.2.3 never indexed (0x10)
      ok = literalField(block, pos, 4, false, sink, user);
    }
    if (!ok) {
      return false;
    }
    field_seen = true;
  }
  return true;
}

inline bool HpackDecoder::readInteger(std::string_view block, std::size_t& pos, int prefix_bits,
                                      std::uint32_t& value) {
  const std::uint32_t prefix_max = (1u << prefix_bits) - 1;
  value = static_cast<std::uint8_t>(block[pos++]) & prefix_max;
  return value < prefix_max || readContinuation(block, pos, value);
}

bool HpackDecoder::readContinuation(std::string_view block, std::size_t& pos,
                                    std::uint32_t& value) {
  const std::size_t start = pos - 1;
  std::uint64_t sum = value;
  for (unsigned n = 0;; ++n) {
    if (n == kMaxContinuationBytes) {
      return fail(start, "an integer of over 5 continuation bytes");
    }
    if (pos >= block.size()) {
      return fail(start, "an integer cut short by the block's end");
    }
    const auto byte = static_cast<std::uint8_t>(block[pos++]);
    sum += std::uint64_t{byte & 0x7fu} << (7 * n);
    if (sum > std::numeric_limits<std::uint32_t>::max()) {
      return fail(start, "an integer over 2^32 - 1");
    }
    if ((byte & 0x80) == 0) {
      break;
    }
  }
  value = static_cast<std::uint32_t>(sum);
  return true;
}

bool HpackDecoder::readString(std::string_view block, std::size_t& pos, Piece& piece) {
  if (pos >= block.size()) {
    return fail(pos, "a string missing at the block's end");
  }
  const std::size_t start = pos;
  const bool huffman = (static_cast<std::uint8_t>(block[pos]) & 0x80) != 0;
  std::uint32_t size = 0;
  if (!readInteger(block, pos, 7, size)) {
    return false;
  }
  if (size > block.size() - pos) {
    return failStringSize(start, size, block.size() - pos);
  }
  const char* raw = block.data() + pos;
  pos += size;
  if (!huffman) {
    piece = Piece{raw, size, 0};
    return true;
  }
  std::size_t offset = 0;
  char* out = scratchAppend(hpack::huffmanDecodedBound(size), offset);
  std::size_t decoded = 0;
  if (const char* what = hpack::huffmanDecode({raw, size}, out, decoded)) {
    return fail(start, what);
  }
  scratch_used_ = offset + decoded;
  piece = Piece{nullptr, static_cast<std::uint32_t>(decoded), offset};
  return true;
}

bool HpackDecoder::indexedField(std::string_view block, std::size_t& pos, FieldSink sink,
                                void* user) {
  const std::size_t start = pos;
  std::uint32_t index = 0;
  if (!readInteger(block, pos, 7, index)) {
    return false;
  }
  if (index <= hpack::kStaticEntries) {
    if (index == 0) {
      return fail(start, "index 0 in an indexed field");
    }
    sink(user, kStaticTable[index].name, kStaticTable[index].value);
    return true;
  }
  if (index - hpack::kStaticEntries > count_) {
    return failIndex(start, index);
  }
  const Entry& entry = dynamicEntry(index - hpack::kStaticEntries);
  std::size_t value_offset = entry.offset + entry.name_len;  // no division: it is per field
  if (value_offset >= max_table_bytes_) {
    value_offset -= max_table_bytes_;
  }
  // An entry's bytes cross the ring's end at most once: one of the two is copied to
  // scratch_ at most, and no growth of it moves the other.
  scratch_used_ = 0;
  const std::string_view name = ringView(entry.offset, entry.name_len);
  const std::string_view value = ringView(value_offset, entry.value_len);
  sink(user, name, value);
  return true;
}

bool HpackDecoder::literalField(std::string_view block, std::size_t& pos, int prefix_bits,
                                bool indexing, FieldSink sink, void* user) {
  const std::size_t start = pos;
  std::uint32_t index = 0;
  if (!readInteger(block, pos, prefix_bits, index)) {
    return false;
  }
  scratch_used_ = 0;
  Piece name{};
  if (index == 0) {
    if (!readString(block, pos, name)) {
      return false;
    }
  } else if (index <= hpack::kStaticEntries) {
    const std::string_view text = kStaticTable[index].name;
    name = Piece{text.data(), static_cast<std::uint32_t>(text.size()), 0};
  } else if (index - hpack::kStaticEntries > count_) {
    return failIndex(start, index);
  } else {
    // Copied: the entry may wrap around the ring's end, and (section 4.4) inserting the new
    // entry may evict this one and overwrite its bytes.
    const Entry& entry = dynamicEntry(index - hpack::kStaticEntries);
    std::size_t offset = 0;
    copyFromRing(scratchAppend(entry.name_len, offset), entry.offset, entry.name_len);
    name = Piece{nullptr, entry.name_len, offset};
  }
  Piece value{};
  if (!readString(block, pos, value)) {
    return false;
  }
  const std::string_view name_view = view(name);
  const std::string_view value_view = view(value);
  if (indexing) {
    insert(name_view, value_view);
  }
  sink(user, name_view, value_view);
  return true;
}

bool HpackDecoder::sizeUpdate(std::string_view block, std::size_t& pos) {
  const std::size_t start = pos;
  std::uint32_t size = 0;
  if (!readInteger(block, pos, 5, size)) {
    return false;
  }
  if (size > max_table_bytes_) {
    return failTableSize(start, size);
  }
  table_limit_ = size;
  evictTo(size);
  return true;
}

std::string_view HpackDecoder::ringView(std::size_t offset, std::uint32_t size) {
  if (size <= max_table_bytes_ - offset) {
    return {ring_.get() + offset, size};
  }
  std::size_t scratch_offset = 0;
  char* out = scratchAppend(size, scratch_offset);
  copyFromRing(out, offset, size);
  return {out, size};
}

void HpackDecoder::copyFromRing(char* out, std::size_t offset, std::size_t size) const {
  const std::size_t first = std::min(size, max_table_bytes_ - offset);
  std::memcpy(out, ring_.get() + offset, first);
  std::memcpy(out + first, ring_.get(), size - first);
}

char* HpackDecoder::scratchAppend(std::size_t size, std::size_t& offset) {
  offset = scratch_used_;
  if (size > scratch_.size() - scratch_used_) {
    // Grows to the longest field seen and stays there: pieces already in it are offsets.
    scratch_.resize(std::max(scratch_used_ + size, 2 * scratch_.size()));
  }
  scratch_used_ += size;
  return scratch_.data() + offset;
}

std::string_view HpackDecoder::view(const Piece& piece) const {
  return {piece.data != nullptr ? piece.data : scratch_.data() + piece.scratch_offset, piece.size};
}

const HpackDecoder::Entry& HpackDecoder::dynamicEntry(std::uint32_t index) const {
  const std::size_t back = index - 1;
  return entries_[newest_ >= back ? newest_ - back : newest_ + entries_.size() - back];
}

void HpackDecoder::evictTo(std::size_t limit) {
  while (table_bytes_ > limit) {
    const Entry& oldest = dynamicEntry(static_cast<std::uint32_t>(count_));
    table_bytes_ -= oldest.name_len + oldest.value_len + kEntryOverhead;
    --count_;
  }
  if (count_ == 0) {
    ring_head_ = 0;  // fewer entries wrapping around the end, fewer copies
  }
}

void HpackDecoder::insert(std::string_view name, std::string_view value) {
  const std::size_t size = name.size() + value.size() + kEntryOverhead;
  if (size > table_limit_) {
    evictTo(0);  // section 4.4: not an error, the table ends up empty
    return;
  }
  evictTo(table_limit_ - size);
  // The live entries' bytes plus the new ones are at most table_limit_ - 32 per entry, less
  // than the ring: the copy never reaches the oldest entry's bytes.
  const auto offset = static_cast<std::uint32_t>(ring_head_);
  writeRing(name);
  writeRing(value);
  newest_ = newest_ + 1 == entries_.size() ? 0 : newest_ + 1;
  entries_[newest_] = Entry{offset, static_cast<std::uint32_t>(name.size()),
                            static_cast<std::uint32_t>(value.size())};
  ++count_;
  table_bytes_ += size;
}

void HpackDecoder::writeRing(std::string_view bytes) {
  if (bytes.empty()) {
    return;
  }
  const std::size_t first = std::min(bytes.size(), max_table_bytes_ - ring_head_);
  std::memcpy(ring_.get() + ring_head_, bytes.data(), first);
  std::memcpy(ring_.get(), bytes.data() + first, bytes.size() - first);
  ring_head_ += bytes.size();
  if (ring_head_ >= max_table_bytes_) {
    ring_head_ -= max_table_bytes_;
  }
}

namespace hpack {

void putInteger(std::string& out, std::uint8_t first, int prefix_bits, std::uint64_t value) {
  const std::uint64_t prefix_max = (1u << prefix_bits) - 1;
  if (value < prefix_max) {
    out.push_back(static_cast<char>(first | value));
    return;
  }
  out.push_back(static_cast<char>(first | prefix_max));
  value -= prefix_max;
  while (value >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void putIndexed(std::string& out, std::uint32_t static_index) {
  putInteger(out, 0x80, 7, static_index);
}

void putLiteral(std::string& out, std::uint32_t static_name_index, std::string_view name,
                std::string_view value) {
  if (static_name_index != 0) {
    putInteger(out, 0x00, 4, static_name_index);
  } else {
    out.push_back(0x00);
    putInteger(out, 0x00, 7, name.size());
    out.append(name);
  }
  putInteger(out, 0x00, 7, value.size());
  out.append(value);
}

std::uint32_t staticNameIndex(std::string_view name) {
  for (std::uint32_t index = 1; index <= kStaticEntries; ++index) {
    if (kStaticTable[index].name == name) {
      return index;
    }
  }
  return 0;
}

std::string_view staticName(std::uint32_t index) {
  return index >= 1 && index <= kStaticEntries ? kStaticTable[index].name : std::string_view{};
}

std::string_view staticValue(std::uint32_t index) {
  return index >= 1 && index <= kStaticEntries ? kStaticTable[index].value : std::string_view{};
}

}  // namespace hpack
}  // namespace sluice::grpc
