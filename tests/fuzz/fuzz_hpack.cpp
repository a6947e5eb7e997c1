// HpackDecoder (src/grpc/hpack.cpp), fed the header blocks a hostile peer may send over one
// connection: whatever arrives, it never crashes or reads outside the block, the dynamic
// table stays within the size the peer set and the one we announce, every decoded field is
// readable while the sink holds it, and our encoder's rendering of the fields decodes back
// to the same fields.
//
// Input: the first byte picks SETTINGS_HEADER_TABLE_SIZE (bits 0-1: 4096, 256, 100 or 0);
// then blocks, each a length and its bytes: one byte under 0xf0 is the length, a byte
// 0xfN is the top 4 bits of a 12-bit length whose low 8 bits follow. A block cut short by the
// input's end is what is left.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "grpc/hpack.hpp"

namespace {

using sluice::grpc::HpackDecoder;
namespace hpack = sluice::grpc::hpack;

struct Fields {
  std::vector<std::pair<std::string, std::string>> list;
  std::size_t most_bytes = 0;  // what one field can be
};

void record(void* user, std::string_view name, std::string_view value) {
  auto* fields = static_cast<Fields*>(user);
  SLUICE_FUZZ_CHECK(name.size() + value.size() <= fields->most_bytes);
  fields->list.emplace_back(name, value);  // reads every byte: ASan sees a dangling view
}

// A field is at most a dynamic table entry, a static one, or the block's strings decoded.
std::size_t mostBytes(std::size_t block_size, std::size_t max_table) {
  return std::max(hpack::huffmanDecodedBound(block_size), max_table) + 64;
}

// Our encoder's rendering of `fields` (plain, Huffman, static-table names) through a fresh
// decoder gives them back.
void checkRoundTrip(const Fields& fields) {
  std::string block(1, hpack::kTableSizeZero);
  for (std::size_t i = 0; i < fields.list.size(); ++i) {
    const auto& [name, value] = fields.list[i];
    if (i % 2 == 0) {
      hpack::putLiteral(block, hpack::staticNameIndex(name), name, value);
    } else {
      block.push_back(0x10);  // never indexed, literal name
      hpack::putHuffmanString(block, name);
      hpack::putHuffmanString(block, value);
    }
  }
  HpackDecoder decoder;
  Fields again;
  again.most_bytes = mostBytes(block.size(), 0);
  SLUICE_FUZZ_CHECK(decoder.decode(block, record, &again));
  SLUICE_FUZZ_CHECK(again.list == fields.list);
  SLUICE_FUZZ_CHECK(decoder.tableEntries() == 0);
}

constexpr std::size_t kTableSizes[] = {4096, 256, 100, 0};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::size_t max_table = kTableSizes[data[0] & 3];
  HpackDecoder decoder(max_table);
  std::size_t pos = 1;
  while (pos < size) {
    std::size_t length = data[pos++];
    if (length >= 0xf0) {
      length = (length & 0x0f) << 8 | (pos < size ? data[pos++] : 0);
    }
    length = std::min(length, size - pos);
    const std::string_view block(reinterpret_cast<const char*>(data + pos), length);
    pos += length;
    Fields fields;
    fields.most_bytes = mostBytes(block.size(), max_table);
    const std::size_t entries_before = decoder.tableEntries();
    if (!decoder.decode(block, record, &fields)) {
      SLUICE_FUZZ_CHECK(decoder.error().rfind("byte ", 0) == 0);
      SLUICE_FUZZ_CHECK(!decoder.decode(block, record, &fields));  // stays failed
      break;
    }
    SLUICE_FUZZ_CHECK(decoder.tableBytes() <= decoder.tableLimit());
    SLUICE_FUZZ_CHECK(decoder.tableLimit() <= max_table);
    SLUICE_FUZZ_CHECK(decoder.tableEntries() * 32 <= decoder.tableBytes());
    // A field adds one entry at most; eviction only removes.
    SLUICE_FUZZ_CHECK(decoder.tableEntries() <= entries_before + fields.list.size());
    checkRoundTrip(fields);
  }
  return 0;
}
