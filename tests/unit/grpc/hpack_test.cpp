// HPACK (src/grpc/hpack.cpp): the examples of RFC 7541 Appendix C, agreement with
// nghttp2's encoder and decoder, and the errors a hostile peer can provoke.
#include "grpc/hpack.hpp"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::grpc {
namespace {

using Field = std::pair<std::string, std::string>;
using Fields = std::vector<Field>;

void record(void* user, std::string_view name, std::string_view value) {
  static_cast<Fields*>(user)->emplace_back(name, value);
}

std::string fromHex(std::string_view hex) {
  std::string bytes;
  int high = -1;
  for (const char c : hex) {
    if (c == ' ') {
      continue;
    }
    const int digit = c <= '9' ? c - '0' : c - 'a' + 10;
    if (high < 0) {
      high = digit;
    } else {
      bytes.push_back(static_cast<char>(high << 4 | digit));
      high = -1;
    }
  }
  return bytes;
}

Fields decodeOk(HpackDecoder& decoder, std::string_view block) {
  Fields fields;
  EXPECT_TRUE(decoder.decode(block, record, &fields)) << decoder.error();
  return fields;
}

/// Dynamic table entry `index` (1 = newest), read back through an indexed field.
Field tableEntry(HpackDecoder& decoder, std::uint32_t index) {
  std::string block;
  hpack::putInteger(block, 0x80, 7, hpack::kStaticEntries + index);
  const Fields fields = decodeOk(decoder, block);
  return fields.size() == 1 ? fields[0] : Field{};
}

/// The error of a block that must fail on a fresh decoder (table limit `max`).
std::string decodeError(std::string_view block, std::size_t max = 4096) {
  HpackDecoder decoder(max);
  Fields fields;
  EXPECT_FALSE(decoder.decode(block, record, &fields));
  return decoder.error();
}

/// nghttp2's decoding of a sequence of blocks on one connection.
std::vector<Fields> nghttp2Inflate(const std::vector<std::string>& blocks) {
  nghttp2_hd_inflater* inflater = nullptr;
  EXPECT_EQ(nghttp2_hd_inflate_new(&inflater), 0);
  std::vector<Fields> out;
  for (const std::string& block : blocks) {
    Fields fields;
    const auto* in = reinterpret_cast<const std::uint8_t*>(block.data());
    std::size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const auto used = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, 1);
      EXPECT_GE(used, 0) << nghttp2_strerror(static_cast<int>(used));
      if (used < 0) {
        break;
      }
      in += used;
      left -= static_cast<std::size_t>(used);
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
        fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
        nghttp2_hd_inflate_end_headers(inflater);
        break;
      }
    }
    out.push_back(std::move(fields));
  }
  nghttp2_hd_inflate_del(inflater);
  return out;
}

// --- RFC 7541 Appendix C -------------------------------------------------------------------

TEST(HpackRfcExamples, C2LiteralsAndIndexedField) {
  HpackDecoder decoder;
  EXPECT_EQ(decodeOk(decoder, fromHex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865"
                                      "6164 6572")),
            (Fields{{"custom-key", "custom-header"}}));  // C.2.1
  EXPECT_EQ(decoder.tableBytes(), 55u);
  EXPECT_EQ(decoder.tableEntries(), 1u);

  HpackDecoder without;
  EXPECT_EQ(decodeOk(without, fromHex("040c 2f73 616d 706c 652f 7061 7468")),
            (Fields{{":path", "/sample/path"}}));  // C.2.2
  EXPECT_EQ(without.tableEntries(), 0u);

  HpackDecoder never;
  EXPECT_EQ(decodeOk(never, fromHex("1008 7061 7373 776f 7264 0673 6563 7265 74")),
            (Fields{{"password", "secret"}}));  // C.2.3
  EXPECT_EQ(never.tableEntries(), 0u);

  HpackDecoder indexed;
  EXPECT_EQ(decodeOk(indexed, fromHex("82")), (Fields{{":method", "GET"}}));  // C.2.4
  EXPECT_EQ(indexed.tableEntries(), 0u);
}

const Fields kRequest1 = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Fields kRequest2 = {{":method", "GET"},
                          {":scheme", "http"},
                          {":path", "/"},
                          {":authority", "www.example.com"},
                          {"cache-control", "no-cache"}};
const Fields kRequest3 = {{":method", "GET"},
                          {":scheme", "https"},
                          {":path", "/index.html"},
                          {":authority", "www.example.com"},
                          {"custom-key", "custom-value"}};

// C.3 (plain) and C.4 (Huffman) decode to the same fields and tables.
void checkRequests(const std::vector<std::string>& blocks) {
  HpackDecoder decoder;
  EXPECT_EQ(decodeOk(decoder, blocks[0]), kRequest1);
  EXPECT_EQ(decoder.tableBytes(), 57u);
  EXPECT_EQ(tableEntry(decoder, 1), Field(":authority", "www.example.com"));

  EXPECT_EQ(decodeOk(decoder, blocks[1]), kRequest2);
  EXPECT_EQ(decoder.tableBytes(), 110u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("cache-control", "no-cache"));
  EXPECT_EQ(tableEntry(decoder, 2), Field(":authority", "www.example.com"));

  EXPECT_EQ(decodeOk(decoder, blocks[2]), kRequest3);
  EXPECT_EQ(decoder.tableBytes(), 164u);
  EXPECT_EQ(decoder.tableEntries(), 3u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("custom-key", "custom-value"));
  EXPECT_EQ(tableEntry(decoder, 2), Field("cache-control", "no-cache"));
  EXPECT_EQ(tableEntry(decoder, 3), Field(":authority", "www.example.com"));

  EXPECT_EQ(nghttp2Inflate(blocks), (std::vector<Fields>{kRequest1, kRequest2, kRequest3}));
}

const std::vector<std::string> kC3 = {
    fromHex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
    fromHex("8286 84be 5808 6e6f 2d63 6163 6865"),
    fromHex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")};
const std::vector<std::string> kC4 = {
    fromHex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"), fromHex("8286 84be 5886 a8eb 1064 9cbf"),
    fromHex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")};

TEST(HpackRfcExamples, C3RequestsWithoutHuffman) { checkRequests(kC3); }
TEST(HpackRfcExamples, C4RequestsWithHuffman) { checkRequests(kC4); }

const Fields kResponse1 = {{":status", "302"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse2 = {{":status", "307"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse3 = {
    {":status", "200"},
    {"cache-control", "private"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
    {"location", "https://www.example.com"},
    {"content-encoding", "gzip"},
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};

// C.5 (plain) and C.6 (Huffman): responses through a 256-byte table, with evictions.
void checkResponses(const std::vector<std::string>& blocks) {
  HpackDecoder decoder(256);
  EXPECT_EQ(decodeOk(decoder, blocks[0]), kResponse1);
  EXPECT_EQ(decoder.tableBytes(), 222u);
  EXPECT_EQ(decoder.tableEntries(), 4u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("location", "https://www.example.com"));
  EXPECT_EQ(tableEntry(decoder, 4), Field(":status", "302"));

  EXPECT_EQ(decodeOk(decoder, blocks[1]), kResponse2);
  EXPECT_EQ(decoder.tableBytes(), 222u);
  EXPECT_EQ(decoder.tableEntries(), 4u);
  EXPECT_EQ(tableEntry(decoder, 1), Field(":status", "307"));
  EXPECT_EQ(tableEntry(decoder, 4), Field("cache-control", "private"));

  EXPECT_EQ(decodeOk(decoder, blocks[2]), kResponse3);
  EXPECT_EQ(decoder.tableBytes(), 215u);
  EXPECT_EQ(decoder.tableEntries(), 3u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("set-cookie", kResponse3[5].second));
  EXPECT_EQ(tableEntry(decoder, 2), Field("content-encoding", "gzip"));
  EXPECT_EQ(tableEntry(decoder, 3), Field("date", "Mon, 21 Oct 2013 20:13:22 GMT"));

  EXPECT_EQ(nghttp2Inflate(blocks), (std::vector<Fields>{kResponse1, kResponse2, kResponse3}));
}

TEST(HpackRfcExamples, C5ResponsesWithoutHuffman) {
  checkResponses(
      {fromHex("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230"
               "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65"
               "7861 6d70 6c65 2e63 6f6d"),
       fromHex("4803 3330 37c1 c0bf"),
       fromHex("88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220"
               "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157"
               "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076"
               "6572 7369 6f6e 3d31")});
}

TEST(HpackRfcExamples, C6ResponsesWithHuffman) {
  checkResponses(
      {fromHex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0"
               "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
       fromHex("4883 640e ffc1 c0bf"),
       fromHex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b"
               "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27"
               "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07")});
}

// --- nghttp2's encoder, our decoder --------------------------------------------------------

class RandomHeaders {
 public:
  explicit RandomHeaders(std::uint32_t seed) : rng_(seed) {
    const char* const names[] = {
        ":method", ":path",        ":authority",   ":scheme",      "content-type",
        "te",      "grpc-timeout", "user-agent",   "x-request-id", "authorization",
        "cookie",  "x-b3-traceid", "grpc-encoding"};
    for (const char* name : names) {
      pool_.emplace_back(name, text(1 + below(40)));
    }
    for (int i = 0; i < 20; ++i) {
      pool_.emplace_back(bytes(1 + below(20)), bytes(below(60)));
    }
  }

  /// A header list: fields of the pool (repeated across blocks, so they get indexed), fresh
  /// ones, non-ASCII bytes, a long value now and then.
  Fields next() {
    Fields fields;
    const std::size_t count = below(16);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t kind = below(10);
      if (kind < 5) {
        fields.push_back(pool_[below(static_cast<std::uint32_t>(pool_.size()))]);
      } else if (kind < 7) {
        fields.emplace_back(pool_[below(static_cast<std::uint32_t>(pool_.size()))].first,
                            text(below(100)));
      } else if (kind < 9) {
        fields.emplace_back(bytes(1 + below(30)), bytes(below(200)));
      } else {
        fields.emplace_back(text(1 + below(10)), below(2) == 0 ? text(5000) : bytes(3000));
      }
    }
    return fields;
  }

  std::uint32_t below(std::uint32_t bound) {
    return std::uniform_int_distribution<std::uint32_t>(0, bound - 1)(rng_);
  }

 private:
  std::string text(std::size_t size) {
    static constexpr std::string_view kChars =
        "abcdefghijklmnopqrstuvwxyz0123456789-_./:=+ ABCDEFGHIJKLMNOPQRSTUVWXYZ<>{}#$~^";
    std::string out(size, ' ');
    for (char& c : out) {
      c = kChars[below(static_cast<std::uint32_t>(kChars.size()))];
    }
    return out;
  }
  std::string bytes(std::size_t size) {
    std::string out(size, ' ');
    for (char& c : out) {
      c = static_cast<char>(below(256));
    }
    return out;
  }

  std::mt19937 rng_;
  Fields pool_;
};

// Our decoder must yield exactly what nghttp2's deflater was given, block after block on one
// connection, with table size updates (several at once) and never-indexed fields.
void crossCheck(std::uint32_t seed, std::size_t table_bytes, int blocks) {
  RandomHeaders random(seed);
  nghttp2_hd_deflater* deflater = nullptr;
  ASSERT_EQ(nghttp2_hd_deflate_new(&deflater, table_bytes), 0);
  HpackDecoder decoder(table_bytes);
  std::vector<std::uint8_t> buffer;
  for (int block = 0; block < blocks; ++block) {
    const std::uint32_t change = random.below(20);
    if (change == 0) {
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater, random.below(2 * table_bytes)), 0);
    } else if (change == 1) {
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater, random.below(64)), 0);
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater, table_bytes), 0);
    }
    const Fields fields = random.next();
    std::vector<nghttp2_nv> nva;
    for (const auto& [name, value] : fields) {
      nva.push_back(nghttp2_nv{
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(),
          static_cast<std::uint8_t>(random.below(8) == 0 ? NGHTTP2_NV_FLAG_NO_INDEX : 0)});
    }
    buffer.resize(nghttp2_hd_deflate_bound(deflater, nva.data(), nva.size()));
    const auto size =
        nghttp2_hd_deflate_hd(deflater, buffer.data(), buffer.size(), nva.data(), nva.size());
    ASSERT_GE(size, 0);
    Fields decoded;
    const std::string_view wire(reinterpret_cast<const char*>(buffer.data()),
                                static_cast<std::size_t>(size));
    ASSERT_TRUE(decoder.decode(wire, record, &decoded))
        << "block " << block << ": " << decoder.error();
    ASSERT_EQ(decoded, fields) << "block " << block;
    ASSERT_LE(decoder.tableBytes(), table_bytes);
  }
  nghttp2_hd_deflate_del(deflater);
}

TEST(HpackNghttp2CrossCheck, DefaultTable) { crossCheck(1, 4096, 3000); }
TEST(HpackNghttp2CrossCheck, SmallTable) { crossCheck(2, 256, 2000); }
TEST(HpackNghttp2CrossCheck, OddSizedTableWrapsEntries) { crossCheck(3, 1000, 2000); }
TEST(HpackNghttp2CrossCheck, LargeTable) { crossCheck(4, 65536, 1000); }
TEST(HpackNghttp2CrossCheck, NoTable) { crossCheck(5, 0, 300); }

// --- our encoder, nghttp2's decoder --------------------------------------------------------

TEST(HpackEncoder, Nghttp2DecodesOurResponses) {
  std::string headers(1, hpack::kTableSizeZero);
  hpack::putIndexed(headers, 8);
  hpack::putLiteral(headers, hpack::staticNameIndex("content-type"), "content-type",
                    "application/grpc");
  hpack::putLiteral(headers, 0, "grpc-accept-encoding", "identity");
  std::string trailers;
  hpack::putLiteral(trailers, 0, "grpc-status", "14");
  hpack::putLiteral(trailers, 0, "grpc-message", std::string(5000, 'x'));
  hpack::putLiteral(trailers, hpack::staticNameIndex("date"), "date", "");
  std::string huffman;
  huffman.push_back(0x00);
  hpack::putHuffmanString(huffman, "grpc-status-details-bin");
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) {
    all_bytes.push_back(static_cast<char>(c));
  }
  hpack::putHuffmanString(huffman, all_bytes);

  const std::vector<Fields> expected = {
      {{":status", "200"},
       {"content-type", "application/grpc"},
       {"grpc-accept-encoding", "identity"}},
      {{"grpc-status", "14"}, {"grpc-message", std::string(5000, 'x')}, {"date", ""}},
      {{"grpc-status-details-bin", all_bytes}}};
  EXPECT_EQ(nghttp2Inflate({headers, trailers, huffman}), expected);
  HpackDecoder decoder;
  EXPECT_EQ(decodeOk(decoder, headers), expected[0]);
  EXPECT_EQ(decodeOk(decoder, trailers), expected[1]);
  EXPECT_EQ(decodeOk(decoder, huffman), expected[2]);
  EXPECT_EQ(decoder.tableEntries(), 0u);
  EXPECT_EQ(decoder.tableLimit(), 0u);
}

TEST(HpackEncoder, IntegersOfRfcSection5) {
  std::string out;
  hpack::putInteger(out, 0x00, 5, 10);  // C.1.1
  EXPECT_EQ(out, fromHex("0a"));
  out.clear();
  hpack::putInteger(out, 0x00, 5, 1337);  // C.1.2
  EXPECT_EQ(out, fromHex("1f9a 0a"));
  out.clear();
  hpack::putInteger(out, 0x00, 8, 42);  // C.1.3
  EXPECT_EQ(out, fromHex("2a"));
  out.clear();
  hpack::putInteger(out, 0x40, 6, 63);  // the prefix exactly full: one zero byte follows
  EXPECT_EQ(out, fromHex("7f00"));
}

TEST(HpackEncoder, StaticNameIndexIsTheLowest) {
  EXPECT_EQ(hpack::staticNameIndex(":authority"), 1u);
  EXPECT_EQ(hpack::staticNameIndex(":method"), 2u);
  EXPECT_EQ(hpack::staticNameIndex(":status"), 8u);
  EXPECT_EQ(hpack::staticNameIndex("content-type"), 31u);
  EXPECT_EQ(hpack::staticNameIndex("www-authenticate"), 61u);
  EXPECT_EQ(hpack::staticNameIndex("grpc-status"), 0u);
  EXPECT_EQ(hpack::staticNameIndex(""), 0u);
  EXPECT_EQ(hpack::staticName(61), "www-authenticate");
  EXPECT_EQ(hpack::staticValue(8), "200");
}

TEST(HpackHuffman, EveryByteRoundTrips) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng() % 64, ' ');
    for (char& c : text) {
      c = static_cast<char>(rng() % 256);
    }
    std::string literal;
    hpack::putHuffmanString(literal, text);
    std::string block(1, 0x00);
    block.push_back(0x01);
    block.push_back('n');
    block += literal;
    HpackDecoder decoder;
    EXPECT_EQ(decodeOk(decoder, block), (Fields{{"n", text}}));
  }
}

// --- the dynamic table ---------------------------------------------------------------------

TEST(HpackDynamicTable, AnEntryLargerThanTheTableEmptiesIt) {
  HpackDecoder decoder(100);
  decodeOk(decoder, fromHex("4001 6101 62"));  // a: b, 34 bytes
  EXPECT_EQ(decoder.tableBytes(), 34u);
  std::string block = fromHex("4001 63");
  hpack::putInteger(block, 0x00, 7, 68);  // c: 68 bytes, 101 > 100
  block += std::string(68, 'v');
  EXPECT_EQ(decodeOk(decoder, block), (Fields{{"c", std::string(68, 'v')}}));
  EXPECT_EQ(decoder.tableEntries(), 0u);
  EXPECT_EQ(decoder.tableBytes(), 0u);
}

TEST(HpackDynamicTable, AnEntryOfExactlyTheLimitFits) {
  HpackDecoder decoder(100);
  std::string block = fromHex("4001 63");
  hpack::putInteger(block, 0x00, 7, 67);
  block += std::string(67, 'v');
  decodeOk(decoder, block);
  EXPECT_EQ(decoder.tableBytes(), 100u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("c", std::string(67, 'v')));
}

// Section 4.4: the new entry's name is that of the entry its insertion evicts.
TEST(HpackDynamicTable, TheNameOfAnEvictedEntryIsKept) {
  HpackDecoder decoder(100);
  decodeOk(decoder, fromHex("4005 6e61 6d65 3101 76"));  // name1: v, 38 bytes
  std::string block = fromHex("7e");                     // indexing, name of index 62
  hpack::putInteger(block, 0x00, 7, 60);
  block += std::string(60, 'w');
  EXPECT_EQ(decodeOk(decoder, block), (Fields{{"name1", std::string(60, 'w')}}));
  EXPECT_EQ(decoder.tableEntries(), 1u);
  EXPECT_EQ(decoder.tableBytes(), 97u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("name1", std::string(60, 'w')));
}

TEST(HpackDynamicTable, SizeUpdatesAtTheStartEvictAndMayRepeat) {
  HpackDecoder decoder;
  decodeOk(decoder, fromHex("4001 6101 62 4001 6301 64"));  // a: b, c: d
  EXPECT_EQ(decoder.tableEntries(), 2u);
  EXPECT_EQ(decodeOk(decoder, fromHex("3f15 82")), (Fields{{":method", "GET"}}));  // to 52
  EXPECT_EQ(decoder.tableLimit(), 52u);
  EXPECT_EQ(tableEntry(decoder, 1), Field("c", "d"));
  EXPECT_EQ(decoder.tableEntries(), 1u);
  decodeOk(decoder, fromHex("20 3fe1 1f"));  // to 0, then to 4096
  EXPECT_EQ(decoder.tableEntries(), 0u);
  EXPECT_EQ(decoder.tableLimit(), 4096u);
  decodeOk(decoder, fromHex("4001 6101 62"));
  EXPECT_EQ(tableEntry(decoder, 1), Field("a", "b"));
}

// Entries wrapping around the end of the byte ring come back whole.
TEST(HpackDynamicTable, EntriesAcrossTheRingsEnd) {
  HpackDecoder decoder(100);
  for (int round = 0; round < 50; ++round) {
    const std::string name(1 + round % 7, static_cast<char>('a' + round % 26));
    const std::string value(round % 30, static_cast<char>('A' + round % 26));
    std::string block(1, 0x40);
    hpack::putInteger(block, 0x00, 7, name.size());
    block += name;
    hpack::putInteger(block, 0x00, 7, value.size());
    block += value;
    EXPECT_EQ(decodeOk(decoder, block), (Fields{{name, value}}));
    EXPECT_EQ(tableEntry(decoder, 1), Field(name, value)) << round;
  }
}

// --- errors --------------------------------------------------------------------------------

TEST(HpackErrors, IndexZero) {
  EXPECT_EQ(decodeError(fromHex("82 80")), "byte 1: index 0 in an indexed field");
}

TEST(HpackErrors, IndexBeyondTheTables) {
  EXPECT_EQ(decodeError(fromHex("82 c6")),
            "byte 1: index 70 beyond the tables (61 static, 0 dynamic)");
  EXPECT_EQ(decodeError(fromHex("4001 6101 62 bf")),
            "byte 5: index 63 beyond the tables (61 static, 1 dynamic)");
  EXPECT_EQ(decodeError(fromHex("0f2f 0176")),
            "byte 0: index 62 beyond the tables (61 static, 0 dynamic)")
      << "a literal's name index";
}

TEST(HpackErrors, TruncatedInteger) {
  EXPECT_EQ(decodeError(fromHex("ff")), "byte 0: an integer cut short by the block's end");
  EXPECT_EQ(decodeError(fromHex("82 ff80")), "byte 1: an integer cut short by the block's end");
  EXPECT_EQ(decodeError(fromHex("0001 61 7f")), "byte 3: an integer cut short by the block's end");
}

TEST(HpackErrors, TruncatedString) {
  EXPECT_EQ(decodeError(fromHex("4005 6162 63")),
            "byte 1: a string of 5 bytes where the block has 3");
  EXPECT_EQ(decodeError(fromHex("4001 61")), "byte 3: a string missing at the block's end");
  EXPECT_EQ(decodeError(fromHex("40")), "byte 1: a string missing at the block's end");
  EXPECT_EQ(decodeError(fromHex("0001 6185 ff")),
            "byte 3: a string of 5 bytes where the block has 1");
}

TEST(HpackErrors, IntegerOverflow) {
  EXPECT_EQ(decodeError(fromHex("ff ffff ffff 0f")), "byte 0: an integer over 2^32 - 1");
  EXPECT_EQ(decodeError(fromHex("ff 8080 8080 8001")),
            "byte 0: an integer of over 5 continuation bytes");
  // 2^32 - 1 itself is an integer, only an index far beyond the tables.
  EXPECT_EQ(decodeError(fromHex("ff 80ff ffff 0f")),
            "byte 0: index 4294967295 beyond the tables (61 static, 0 dynamic)");
}

TEST(HpackErrors, SizeUpdateOverTheMaximum) {
  EXPECT_EQ(decodeError(fromHex("3fe2 1f")),
            "byte 0: a dynamic table size update to 4097 bytes, over the 4096 of "
            "SETTINGS_HEADER_TABLE_SIZE");
  EXPECT_EQ(decodeError(fromHex("20 3f 82 01"), 100),
            "byte 1: a dynamic table size update to 161 bytes, over the 100 of "
            "SETTINGS_HEADER_TABLE_SIZE");
}

TEST(HpackErrors, SizeUpdateAfterAField) {
  EXPECT_EQ(decodeError(fromHex("82 20")), "byte 1: dynamic table size update after a field");
  EXPECT_EQ(decodeError(fromHex("20 0001 6101 62 20")),
            "byte 6: dynamic table size update after a field");
}

// A literal named "n" whose value is the Huffman string `code`.
std::string huffmanValue(std::string_view code) {
  std::string block = fromHex("0001 6e");
  hpack::putInteger(block, 0x80, 7, code.size());
  block += code;
  return block;
}

TEST(HpackErrors, HuffmanEos) {
  EXPECT_EQ(decodeError(huffmanValue(fromHex("ffff ffff"))),
            "byte 3: the EOS symbol inside a string");
  // 'a' (00011), EOS (30 ones), 5 bits of padding.
  EXPECT_EQ(decodeError(huffmanValue(fromHex("1fff ffff ff"))),
            "byte 3: the EOS symbol inside a string");
  // Long enough for the decoder's 8-bytes-at-a-time loop.
  EXPECT_EQ(decodeError(huffmanValue(fromHex("18ffffffff18c6318c6318ff"))),
            "byte 3: the EOS symbol inside a string");
}

TEST(HpackErrors, HuffmanPaddingOfEightBitsOrMore) {
  EXPECT_EQ(decodeError(huffmanValue(fromHex("ff"))), "byte 3: Huffman padding longer than 7 bits");
  EXPECT_EQ(decodeError(huffmanValue(fromHex("1fff"))),  // 'a', then 11 ones
            "byte 3: Huffman padding longer than 7 bits");
}

TEST(HpackErrors, HuffmanPaddingOfZeros) {
  EXPECT_EQ(decodeError(huffmanValue(fromHex("18"))),  // 'a', then 000
            "byte 3: Huffman padding other than the first bits of EOS");
  EXPECT_EQ(decodeError(huffmanValue(fromHex("1e"))),  // 'a', then 110
            "byte 3: Huffman padding other than the first bits of EOS");
  EXPECT_EQ(decodeError(huffmanValue(fromHex("ffff fe"))),  // a 13-bit code cut short
            "byte 3: a truncated Huffman code");
}

TEST(HpackHuffman, ValidPaddingAndTheEmptyString) {
  HpackDecoder decoder;
  EXPECT_EQ(decodeOk(decoder, huffmanValue("")), (Fields{{"n", ""}}));
  EXPECT_EQ(decodeOk(decoder, huffmanValue(fromHex("1f"))), (Fields{{"n", "a"}}));
  EXPECT_EQ(decodeOk(decoder, huffmanValue(fromHex("07"))), (Fields{{"n", "0"}}));
  EXPECT_EQ(decodeOk(decoder, huffmanValue(fromHex("ffc7"))), (Fields{{"n", std::string(1, '\0')}}))
      << "a 13-bit code, 3 bits of padding";
}

TEST(HpackErrors, TheDecoderStaysFailed) {
  HpackDecoder decoder;
  Fields fields;
  EXPECT_FALSE(decoder.decode(fromHex("80"), record, &fields));
  const std::string first = decoder.error();
  EXPECT_FALSE(decoder.decode(fromHex("82"), record, &fields));
  EXPECT_EQ(decoder.error(), first);
  EXPECT_TRUE(fields.empty());
}

}  // namespace
}  // namespace sluice::grpc
