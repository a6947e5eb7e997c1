#pragma once
// src/grpc/hpack.hpp
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::grpc {

/// HPACK (RFC 7541) decoding of the header blocks one HTTP/2 connection receives: the static
/// table, the dynamic table (its size bounded by the SETTINGS_HEADER_TABLE_SIZE we announce),
/// integers and Huffman-coded strings.
///
/// The dynamic table is one byte ring of `max_table_bytes` (names and values back to back)
/// plus a ring of entry positions, both allocated once: a hostile peer cycling large entries
/// through the table can make it hold no more than that, and a steady connection decodes
/// without allocating. The header list's total size is not limited here (the frame layer
/// bounds the block and counts what the sink receives); names are not checked for case or
/// characters either (that is HTTP/2's rule, section 8.1.2, not HPACK's).
class HpackDecoder {
 public:
  /// One decoded field; the views are valid until the sink returns.
  using FieldSink = void (*)(void* user, std::string_view name, std::string_view value);

  /// `max_table_bytes`: the SETTINGS_HEADER_TABLE_SIZE we announce (RFC 7541 default 4096).
  explicit HpackDecoder(std::size_t max_table_bytes = 4096);

  /// Decodes one whole header block (a HEADERS frame's fragment and its CONTINUATIONs,
  /// concatenated), calling `sink` for each field in order. False: a decoding error
  /// (COMPRESSION_ERROR, a connection error); `error()` says what and at which byte offset,
  /// and the decoder must not be used again.
  bool decode(std::string_view block, FieldSink sink, void* user);

  /// What the last failed decode() found, e.g. "byte 12: index 70 beyond the tables".
  const std::string& error() const { return error_; }
  /// Bytes the dynamic table holds (RFC 7541 section 4.1 sizes: name + value + 32 each).
  std::size_t tableBytes() const { return table_bytes_; }
  std::size_t tableEntries() const { return count_; }
  /// The size limit the peer's last dynamic table size update set (at most max_table_bytes).
  std::size_t tableLimit() const { return table_limit_; }

 private:
  struct Entry {
    std::uint32_t offset;  // of the name in ring_; the value follows it (both may wrap)
    std::uint32_t name_len;
    std::uint32_t value_len;
  };
  // A string of a literal field: a view of stable bytes (the block, the static table) or,
  // with a null `data`, bytes at `scratch_offset` in scratch_, which may still move while
  // the field's other string grows it.
  struct Piece {
    const char* data;
    std::uint32_t size;
    std::size_t scratch_offset;
  };

  // The failures build their messages out of the way of the decoding paths.
  [[gnu::cold, gnu::noinline]] bool fail(std::size_t offset, std::string_view what);
  [[gnu::cold, gnu::noinline]] bool failIndex(std::size_t offset, std::uint32_t index);
  [[gnu::cold, gnu::noinline]] bool failStringSize(std::size_t offset, std::uint32_t size,
                                                   std::size_t left);
  [[gnu::cold, gnu::noinline]] bool failTableSize(std::size_t offset, std::uint32_t size);
  bool readInteger(std::string_view block, std::size_t& pos, int prefix_bits, std::uint32_t& value);
  bool readContinuation(std::string_view block, std::size_t& pos, std::uint32_t& value);
  bool readString(std::string_view block, std::size_t& pos, Piece& piece);
  bool indexedField(std::string_view block, std::size_t& pos, FieldSink sink, void* user);
  bool literalField(std::string_view block, std::size_t& pos, int prefix_bits, bool indexing,
                    FieldSink sink, void* user);
  bool sizeUpdate(std::string_view block, std::size_t& pos);
  std::string_view ringView(std::size_t offset, std::uint32_t size);
  void copyFromRing(char* out, std::size_t offset, std::size_t size) const;
  char* scratchAppend(std::size_t size, std::size_t& offset);
  std::string_view view(const Piece& piece) const;
  const Entry& dynamicEntry(std::uint32_t index) const;
  void evictTo(std::size_t limit);
  void insert(std::string_view name, std::string_view value);
  void writeRing(std::string_view bytes);

  const std::size_t max_table_bytes_;
  std::size_t table_limit_;
  std::size_t table_bytes_ = 0;
  std::unique_ptr<char[]> ring_;  // max_table_bytes_ bytes of names and values
  std::size_t ring_head_ = 0;     // where the next entry's name goes
  std::vector<Entry> entries_;    // a ring, newest at newest_
  std::size_t newest_ = 0;
  std::size_t count_ = 0;
  std::string scratch_;  // Huffman-decoded strings and copies of wrapped entries
  std::size_t scratch_used_ = 0;
  std::string error_;
  bool failed_ = false;
};

/// Encoding of response header fields without the dynamic table (so a peer's
/// SETTINGS_HEADER_TABLE_SIZE never matters): plain (non-Huffman) literals.
namespace hpack {
/// An HPACK integer with an N-bit prefix (RFC 7541 section 5.1); `first` holds the bits above
/// the prefix.
void putInteger(std::string& out, std::uint8_t first, int prefix_bits, std::uint64_t value);
/// Dynamic table size update to 0 (0x20): sent at the start of our first header block.
inline constexpr char kTableSizeZero = 0x20;
/// An indexed field of the static table (0x80 | index), e.g. 8 for ":status: 200".
void putIndexed(std::string& out, std::uint32_t static_index);
/// "Literal Header Field without Indexing" with the name as a static-table index (1..61) or,
/// with index 0, as a literal name (section 6.2.2); value as a plain string literal.
void putLiteral(std::string& out, std::uint32_t static_name_index, std::string_view name,
                std::string_view value);
/// The static table index of a name (the lowest index with that name), 0 if none.
std::uint32_t staticNameIndex(std::string_view name);

/// Entries of the static table (RFC 7541 Appendix A), 1..61.
inline constexpr std::uint32_t kStaticEntries = 61;
/// Static table entry `index` (1..kStaticEntries).
std::string_view staticName(std::uint32_t index);
std::string_view staticValue(std::uint32_t index);

/// The room huffmanDecode() needs for a string of `encoded` bytes: what it decodes to (at
/// most 8/5 of it, the shortest code having 5 bits), and a byte it may write past that.
constexpr std::size_t huffmanDecodedBound(std::size_t encoded) { return encoded * 8 / 5 + 1; }
/// Decodes a Huffman-coded string (section 5.2) into `out`, which holds at least
/// huffmanDecodedBound(in.size()) bytes. Null on success with `out_size` set, else what was
/// wrong: the EOS symbol inside, padding over 7 bits, or padding other than EOS's first bits.
const char* huffmanDecode(std::string_view in, char* out, std::size_t& out_size);
/// Appends `text` as a Huffman-coded string literal (H bit, length, code), for tests and for
/// anyone whose values compress.
void putHuffmanString(std::string& out, std::string_view text);
}  // namespace hpack
}  // namespace sluice::grpc
