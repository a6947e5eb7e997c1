// The Huffman code of HPACK (RFC 7541 Appendix B) and its decoder (section 5.2).
//
// The decoder reads a 64-bit window of the input, most significant bit first. Codes of up to
// kFastBits bits (every letter, digit and most punctuation: what header fields are made of)
// are found by one lookup of the window's next kFastBits bits; longer ones by a walk over the
// canonical code's lengths (the code is canonical: within a length, codes are consecutive in
// symbol order, and a longer code is greater than every shorter one left-aligned). Both
// tables are computed at compile time from kCodes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "grpc/hpack.hpp"

namespace sluice::grpc::hpack {
namespace {

struct Code {
  std::uint32_t code;  // right-aligned
  std::uint8_t bits;
};

constexpr std::size_t kSymbols = 257;  // 256 octets and EOS
constexpr unsigned kEos = 256;
constexpr unsigned kMaxBits = 30;

// RFC 7541 Appendix B, the Huffman code, by symbol: {code as hex, bits}. The text was
// generated from the appendix's table (a script printing each symbol's code and length).
constexpr Code kCodes[kSymbols] = {
    {0x1ff8, 13},     {0x7fffd8, 23},   {0xfffffe2, 28},  {0xfffffe3, 28},  // 0..3
    {0xfffffe4, 28},  {0xfffffe5, 28},  {0xfffffe6, 28},  {0xfffffe7, 28},  // 4..7
    {0xfffffe8, 28},  {0xffffea, 24},   {0x3ffffffc, 30}, {0xfffffe9, 28},  // 8..11
    {0xfffffea, 28},  {0x3ffffffd, 30}, {0xfffffeb, 28},  {0xfffffec, 28},  // 12..15
    {0xfffffed, 28},  {0xfffffee, 28},  {0xfffffef, 28},  {0xffffff0, 28},  // 16..19
    {0xffffff1, 28},  {0xffffff2, 28},  {0x3ffffffe, 30}, {0xffffff3, 28},  // 20..23
    {0xffffff4, 28},  {0xffffff5, 28},  {0xffffff6, 28},  {0xffffff7, 28},  // 24..27
    {0xffffff8, 28},  {0xffffff9, 28},  {0xffffffa, 28},  {0xffffffb, 28},  // 28..31
    {0x14, 6},        {0x3f8, 10},      {0x3f9, 10},      {0xffa, 12},      // 32..35
    {0x1ff9, 13},     {0x15, 6},        {0xf8, 8},        {0x7fa, 11},      // 36..39
    {0x3fa, 10},      {0x3fb, 10},      {0xf9, 8},        {0x7fb, 11},      // 40..43
    {0xfa, 8},        {0x16, 6},        {0x17, 6},        {0x18, 6},        // 44..47
    {0x0, 5},         {0x1, 5},         {0x2, 5},         {0x19, 6},        // 48..51
    {0x1a, 6},        {0x1b, 6},        {0x1c, 6},        {0x1d, 6},        // 52..55
    {0x1e, 6},        {0x1f, 6},        {0x5c, 7},        {0xfb, 8},        // 56..59
    {0x7ffc, 15},     {0x20, 6},        {0xffb, 12},      {0x3fc, 10},      // 60..63
    {0x1ffa, 13},     {0x21, 6},        {0x5d, 7},        {0x5e, 7},        // 64..67
    {0x5f, 7},        {0x60, 7},        {0x61, 7},        {0x62, 7},        // 68..71
    {0x63, 7},        {0x64, 7},        {0x65, 7},        {0x66, 7},        // 72..75
    {0x67, 7},        {0x68, 7},        {0x69, 7},        {0x6a, 7},        // 76..79
    {0x6b, 7},        {0x6c, 7},        {0x6d, 7},        {0x6e, 7},        // 80..83
    {0x6f, 7},        {0x70, 7},        {0x71, 7},        {0x72, 7},        // 84..87
    {0xfc, 8},        {0x73, 7},        {0xfd, 8},        {0x1ffb, 13},     // 88..91
    {0x7fff0, 19},    {0x1ffc, 13},     {0x3ffc, 14},     {0x22, 6},        // 92..95
    {0x7ffd, 15},     {0x3, 5},         {0x23, 6},        {0x4, 5},         // 96..99
    {0x24, 6},        {0x5, 5},         {0x25, 6},        {0x26, 6},        // 100..103
    {0x27, 6},        {0x6, 5},         {0x74, 7},        {0x75, 7},        // 104..107
    {0x28, 6},        {0x29, 6},        {0x2a, 6},        {0x7, 5},         // 108..111
    {0x2b, 6},        {0x76, 7},        {0x2c, 6},        {0x8, 5},         // 112..115
    {0x9, 5},         {0x2d, 6},        {0x77, 7},        {0x78, 7},        // 116..119
    {0x79, 7},        {0x7a, 7},        {0x7b, 7},        {0x7ffe, 15},     // 120..123
    {0x7fc, 11},      {0x3ffd, 14},     {0x1ffd, 13},     {0xffffffc, 28},  // 124..127
    {0xfffe6, 20},    {0x3fffd2, 22},   {0xfffe7, 20},    {0xfffe8, 20},    // 128..131
    {0x3fffd3, 22},   {0x3fffd4, 22},   {0x3fffd5, 22},   {0x7fffd9, 23},   // 132..135
    {0x3fffd6, 22},   {0x7fffda, 23},   {0x7fffdb, 23},   {0x7fffdc, 23},   // 136..139
    {0x7fffdd, 23},   {0x7fffde, 23},   {0xffffeb, 24},   {0x7fffdf, 23},   // 140..143
    {0xffffec, 24},   {0xffffed, 24},   {0x3fffd7, 22},   {0x7fffe0, 23},   // 144..147
    {0xffffee, 24},   {0x7fffe1, 23},   {0x7fffe2, 23},   {0x7fffe3, 23},   // 148..151
    {0x7fffe4, 23},   {0x1fffdc, 21},   {0x3fffd8, 22},   {0x7fffe5, 23},   // 152..155
    {0x3fffd9, 22},   {0x7fffe6, 23},   {0x7fffe7, 23},   {0xffffef, 24},   // 156..159
    {0x3fffda, 22},   {0x1fffdd, 21},   {0xfffe9, 20},    {0x3fffdb, 22},   // 160..163
    {0x3fffdc, 22},   {0x7fffe8, 23},   {0x7fffe9, 23},   {0x1fffde, 21},   // 164..167
    {0x7fffea, 23},   {0x3fffdd, 22},   {0x3fffde, 22},   {0xfffff0, 24},   // 168..171
    {0x1fffdf, 21},   {0x3fffdf, 22},   {0x7fffeb, 23},   {0x7fffec, 23},   // 172..175
    {0x1fffe0, 21},   {0x1fffe1, 21},   {0x3fffe0, 22},   {0x1fffe2, 21},   // 176..179
    {0x7fffed, 23},   {0x3fffe1, 22},   {0x7fffee, 23},   {0x7fffef, 23},   // 180..183
    {0xfffea, 20},    {0x3fffe2, 22},   {0x3fffe3, 22},   {0x3fffe4, 22},   // 184..187
    {0x7ffff0, 23},   {0x3fffe5, 22},   {0x3fffe6, 22},   {0x7ffff1, 23},   // 188..191
    {0x3ffffe0, 26},  {0x3ffffe1, 26},  {0xfffeb, 20},    {0x7fff1, 19},    // 192..195
    {0x3fffe7, 22},   {0x7ffff2, 23},   {0x3fffe8, 22},   {0x1ffffec, 25},  // 196..199
    {0x3ffffe2, 26},  {0x3ffffe3, 26},  {0x3ffffe4, 26},  {0x7ffffde, 27},  // 200..203
    {0x7ffffdf, 27},  {0x3ffffe5, 26},  {0xfffff1, 24},   {0x1ffffed, 25},  // 204..207
    {0x7fff2, 19},    {0x1fffe3, 21},   {0x3ffffe6, 26},  {0x7ffffe0, 27},  // 208..211
    {0x7ffffe1, 27},  {0x3ffffe7, 26},  {0x7ffffe2, 27},  {0xfffff2, 24},   // 212..215
    {0x1fffe4, 21},   {0x1fffe5, 21},   {0x3ffffe8, 26},  {0x3ffffe9, 26},  // 216..219
    {0xffffffd, 28},  {0x7ffffe3, 27},  {0x7ffffe4, 27},  {0x7ffffe5, 27},  // 220..223
    {0xfffec, 20},    {0xfffff3, 24},   {0xfffed, 20},    {0x1fffe6, 21},   // 224..227
    {0x3fffe9, 22},   {0x1fffe7, 21},   {0x1fffe8, 21},   {0x7ffff3, 23},   // 228..231
    {0x3fffea, 22},   {0x3fffeb, 22},   {0x1ffffee, 25},  {0x1ffffef, 25},  // 232..235
    {0xfffff4, 24},   {0xfffff5, 24},   {0x3ffffea, 26},  {0x7ffff4, 23},   // 236..239
    {0x3ffffeb, 26},  {0x7ffffe6, 27},  {0x3ffffec, 26},  {0x3ffffed, 26},  // 240..243
    {0x7ffffe7, 27},  {0x7ffffe8, 27},  {0x7ffffe9, 27},  {0x7ffffea, 27},  // 244..247
    {0x7ffffeb, 27},  {0xffffffe, 28},  {0x7ffffec, 27},  {0x7ffffed, 27},  // 248..251
    {0x7ffffee, 27},  {0x7ffffef, 27},  {0x7fffff0, 27},  {0x3ffffee, 26},  // 252..255
    {0x3fffffff, 30},                                                       // 256..256
};

constexpr unsigned kFastBits = 12;
constexpr std::size_t kFastSize = std::size_t{1} << kFastBits;

// kSingle[next kFastBits bits]: symbol | bits << 8 for a code of at most kFastBits bits,
// 0 where the next bits start a longer code. Only an ingredient of kFast.
constexpr auto kSingle = [] {
  std::array<std::uint16_t, kFastSize> table{};
  for (unsigned symbol = 0; symbol < kEos; ++symbol) {
    const Code code = kCodes[symbol];
    if (code.bits > kFastBits) {
      continue;
    }
    const unsigned spare = kFastBits - code.bits;
    for (std::uint32_t low = 0; low < (1u << spare); ++low) {
      table[(code.code << spare) | low] = static_cast<std::uint16_t>(symbol | code.bits << 8);
    }
  }
  return table;
}();

// kFast[next kFastBits bits]: the one or two whole codes they start with, so that the usual
// 5- to 8-bit characters come two a lookup. 0 where the first code is longer. Bits 0-5: the
// lengths of both (of the first alone if there is no second), so that the window's shift
// needs no masking; 6-7: how many; 8-15: the first symbol; 16-23: the second; 24-28: the
// first's length.
constexpr auto kFast = [] {
  std::array<std::uint32_t, kFastSize> table{};
  for (std::uint32_t index = 0; index < kFastSize; ++index) {
    const std::uint32_t first = kSingle[index];
    if (first == 0) {
      continue;
    }
    const std::uint32_t first_bits = first >> 8;
    // The bits after the first code, zeros below: a code found in them is whole only if it
    // fits in what was real.
    const std::uint32_t second = kSingle[(index << first_bits) & (kFastSize - 1)];
    const std::uint32_t both_bits = first_bits + (second >> 8);
    if (second != 0 && both_bits <= kFastBits) {
      table[index] =
          both_bits | 2u << 6 | (first & 0xff) << 8 | (second & 0xff) << 16 | first_bits << 24;
    } else {
      table[index] = first_bits | 1u << 6 | (first & 0xff) << 8 | first_bits << 24;
    }
  }
  return table;
}();

// The canonical code by length: the symbols sorted by (bits, symbol); for a length, the
// first code, where its symbols start in that order, and the bound every code of that length
// or shorter lies below, left-aligned in 32 bits.
struct Canonical {
  std::array<std::uint64_t, kMaxBits + 1> limit{};
  std::array<std::uint32_t, kMaxBits + 1> first{};
  std::array<std::uint16_t, kMaxBits + 1> start{};
  std::array<std::uint16_t, kSymbols> symbols{};
};

constexpr Canonical kCanonical = [] {
  Canonical table;
  std::uint32_t code = 0;
  std::uint16_t sorted = 0;
  for (unsigned bits = 1; bits <= kMaxBits; ++bits) {
    table.first[bits] = code;
    table.start[bits] = sorted;
    for (unsigned symbol = 0; symbol < kSymbols; ++symbol) {
      if (kCodes[symbol].bits == bits) {
        table.symbols[sorted++] = static_cast<std::uint16_t>(symbol);
        ++code;
      }
    }
    table.limit[bits] = std::uint64_t{code} << (32 - bits);
    code <<= 1;
  }
  return table;
}();

static_assert(kCanonical.limit[kMaxBits] == std::uint64_t{1} << 32, "a complete code");
static_assert(kFast[0] == (10 | 2u << 6 | '0' << 8 | '0' << 16 | 5 << 24), "'0' is 00000");

// The symbol and length of the code starting the window `window` (its top 32 bits matter),
// for a code longer than kFastBits.
inline void slowLookup(std::uint64_t window, unsigned& symbol, unsigned& bits) {
  const auto top = static_cast<std::uint32_t>(window >> 32);
  unsigned length = kFastBits + 1;
  while (top >= kCanonical.limit[length]) {
    ++length;
  }
  const std::uint32_t rank = (top >> (32 - length)) - kCanonical.first[length];
  symbol = kCanonical.symbols[kCanonical.start[length] + rank];
  bits = length;
}

// The symbol and length of the code starting the window `window`.
inline void lookup(std::uint64_t window, unsigned& symbol, unsigned& bits) {
  const std::uint32_t fast = kFast[window >> (64 - kFastBits)];
  if (fast != 0) {
    symbol = (fast >> 8) & 0xffu;
    bits = fast >> 24;
  } else {
    slowLookup(window, symbol, bits);
  }
}

inline std::uint64_t loadBigEndian64(const unsigned char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return __builtin_bswap64(word);
}

// The input from `p` (fewer than 8 bytes) to `end`, left-aligned, then ones.
inline std::uint64_t tailWord(const unsigned char* begin, const unsigned char* p,
                              const unsigned char* end) {
  const auto rest = static_cast<unsigned>(end - p);
  if (rest == 0) {
    return ~std::uint64_t{0};
  }
  std::uint64_t bytes = 0;  // the `rest` bytes at the bottom
  if (end - begin >= 8) {
    bytes = loadBigEndian64(end - 8);
  } else {
    for (; p < end; ++p) {
      bytes = bytes << 8 | *p;
    }
  }
  return bytes << (64 - 8 * rest) | ~std::uint64_t{0} >> (8 * rest);
}

// The input as bits, most significant first.
struct BitReader {
  explicit BitReader(std::string_view in)
      : left(in.size() * 8),
        begin(reinterpret_cast<const unsigned char*>(in.data())),
        end(begin + in.size()),
        p(begin) {}

  void refill() {
    if (!in_tail) {
      if (end - p >= 8) {
        window |= loadBigEndian64(p) >> bits;
        p += (63 - bits) >> 3;
        bits |= 56;
        return;
      }
      stream = tailWord(begin, p, end);
      in_tail = true;
    }
    window |= stream >> bits;  // bits < kMaxBits: the shift is defined
    stream = bits == 0 ? ~std::uint64_t{0} : stream << (64 - bits) | ~std::uint64_t{0} >> bits;
    bits = 64;
  }

  void consume(unsigned length) {
    window <<= length;
    bits -= length;
    left -= length;
  }

  // The next `bits` bits of input; below them, possibly the first bits of the next byte (the
  // same ones the next load ORs in again), then zeros.
  std::uint64_t window = 0;
  unsigned bits = 0;
  std::size_t left;  // bits not decoded yet
  const unsigned char* const begin;
  const unsigned char* const end;
  const unsigned char* p;
  // Once fewer than 8 bytes are left: what follows the window, then ones (EOS's first
  // bits), so that a code cut short by the end reads as longer than the input left (every
  // code but EOS has a zero in it). Kept in a register: bytes stored to be loaded as a word
  // would stall the load.
  std::uint64_t stream = 0;
  bool in_tail = false;
};

// Writes the one or two symbols of kFast entry `fast`; returns their length. With one, the
// byte after it is written too: within huffmanDecodedBound(), and overwritten by the next
// symbol if there is one.
inline unsigned emit(std::uint32_t fast, char*& o) {
  o[0] = static_cast<char>(fast >> 8);
  o[1] = static_cast<char>(fast >> 16);
  o += (fast >> 6) & 3;
  return fast & 0x3fu;  // x86 masks a shift's count to 6 bits: this and is free
}

// While 30 bits or more are left, every code is whole.
inline const char* decodeWhole(BitReader& in, char*& o) {
  unsigned symbol = 0;
  unsigned length = 0;
  while (in.left >= kMaxBits) {
    if (in.bits < kMaxBits) {
      in.refill();
    }
    const std::uint32_t fast = kFast[in.window >> (64 - kFastBits)];
    if (fast != 0) {
      length = emit(fast, o);
    } else {
      slowLookup(in.window, symbol, length);
      if (symbol == kEos) {
        return "the EOS symbol inside a string";
      }
      *o++ = static_cast<char>(symbol);
    }
    in.consume(length);
  }
  return nullptr;
}

// The last bits: a code may be cut short, the rest must be padding.
inline const char* decodeEnd(BitReader& in, char*& o) {
  unsigned symbol = 0;
  unsigned length = 0;
  while (in.left > 0) {
    if (in.bits < kMaxBits) {
      in.refill();
    }
    const bool ones = (in.window >> (64 - in.left)) == (std::uint64_t{1} << in.left) - 1;
    if (ones && in.left <= 7) {
      break;  // padding: no code of up to 7 bits is all ones
    }
    const std::uint32_t fast = kFast[in.window >> (64 - kFastBits)];
    if (fast != 0 && (fast & 0x3fu) <= in.left) {
      length = emit(fast, o);
    } else {
      lookup(in.window, symbol, length);
      if (length > in.left) {
        if (in.left > 7) {
          return ones ? "Huffman padding longer than 7 bits" : "a truncated Huffman code";
        }
        return "Huffman padding other than the first bits of EOS";
      }
      *o++ = static_cast<char>(symbol);  // not EOS: EOS is longer than what is left
    }
    in.consume(length);
  }
  return nullptr;
}

}  // namespace

const char* huffmanDecode(std::string_view in, char* out, std::size_t& out_size) {
  BitReader reader(in);
  char* o = out;
  if (const char* error = decodeWhole(reader, o)) {
    return error;
  }
  if (const char* error = decodeEnd(reader, o)) {
    return error;
  }
  out_size = static_cast<std::size_t>(o - out);
  return nullptr;
}

void putHuffmanString(std::string& out, std::string_view text) {
  std::size_t total_bits = 0;
  for (const char c : text) {
    total_bits += kCodes[static_cast<unsigned char>(c)].bits;
  }
  putInteger(out, 0x80, 7, (total_bits + 7) / 8);
  std::uint64_t pending = 0;  // `held` bits, right-aligned
  unsigned held = 0;
  for (const char c : text) {
    const Code code = kCodes[static_cast<unsigned char>(c)];
    pending = pending << code.bits | code.code;
    held += code.bits;
    while (held >= 8) {
      held -= 8;
      out.push_back(static_cast<char>(pending >> held));
    }
  }
  if (held > 0) {  // pad with EOS's first bits (ones)
    out.push_back(static_cast<char>(pending << (8 - held) | ((1u << (8 - held)) - 1)));
  }
}

}  // namespace sluice::grpc::hpack
