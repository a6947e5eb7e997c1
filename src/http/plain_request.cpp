#include "http/plain_request.hpp"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sluice/common/ascii.hpp"
#include "sluice/common/words.hpp"

namespace sluice::http {
namespace {

// tchar (RFC 9110 5.6.2): what a method and a field name are made of; the same set as
// Beast's is_token.
constexpr std::array<bool, 256> kToken = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) {
    t[static_cast<std::size_t>(c)] = true;
  }
  for (int c = 'A'; c <= 'Z'; ++c) {
    t[static_cast<std::size_t>(c)] = true;
    t[static_cast<std::size_t>(c + 32)] = true;
  }
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) {
    t[static_cast<unsigned char>(c)] = true;
  }
  return t;
}();

bool isToken(char c) { return kToken[static_cast<unsigned char>(c)]; }
bool isBlank(char c) { return c == ' ' || c == '\t'; }

using words::kHighs;
using words::kOnes;

/// The high bit of each byte of `word` under `bound` (at most 0x80): exact for the lowest
/// such byte (the borrow that may flag the bytes above it comes only from a byte flagged).
constexpr std::uint64_t under(std::uint64_t word, std::uint64_t bound) {
  return (word - bound * kOnes) & ~word & kHighs;
}

/// The high bit of each byte of `word` at or over 0x7f (DEL and obs-text): exact for the
/// lowest such byte (a carry goes only upwards).
constexpr std::uint64_t overVisible(std::uint64_t word) { return ((word + kOnes) | word) & kHighs; }

/// The first byte in [first, last) under `kBound` (SP or '!') or over 0x7e; `last` when
/// there is none. Sixteen bytes at a time where SSE2 is (x86-64 always), eight at a time
/// (SWAR: the lowest byte a word flags is exact), then one at a time.
template <unsigned char kBound>
const char* firstOutside(const char* first, const char* last) {
#if defined(__SSE2__)
  // As signed bytes, those at or over 0x80 are under the bound too.
  const __m128i bound = _mm_set1_epi8(static_cast<char>(kBound));
  const __m128i del = _mm_set1_epi8(0x7f);
  while (last - first >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first));
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, bound), _mm_cmpeq_epi8(v, del))));
    if (mask != 0) {
      return first + std::countr_zero(mask);
    }
    first += 16;
  }
#endif
  while (last - first >= 8) {
    const std::uint64_t word = words::load(first);
    const std::uint64_t flags = under(word, kBound) | overVisible(word);
    if (flags != 0) {
      return first + std::countr_zero(flags) / 8;
    }
    first += 8;
  }
  while (first != last && static_cast<unsigned char>(*first) >= kBound &&
         static_cast<unsigned char>(*first) < 0x7f) {
    ++first;
  }
  return first;
}

/// The first byte in [first, last) that is not visible ASCII (0x21 to 0x7e), nor SP or HTAB
/// when `kBlanks`; `last` when there is none. An HTAB (under SP) where blanks are taken is
/// stepped over.
template <bool kBlanks>
const char* firstInvisible(const char* first, const char* last) {
  for (;;) {
    first = firstOutside < kBlanks ? 0x20 : 0x21 > (first, last);
    if (first == last || !(kBlanks && *first == '\t')) {
      return first;
    }
    ++first;
  }
}

/// The first byte in [first, last) that is ':' or not visible ASCII; `last` when there is
/// none: where a field name of the plain form ends. Sixteen bytes at a time where SSE2 is
/// (x86-64 always; a name usually takes one step), then one at a time. The name's bytes are
/// tchars or not (knownName(), allTokens()) is decided after, on the name as a whole.
const char* nameEnd(const char* first, const char* last) {
#if defined(__SSE2__)
  // As signed bytes, those at or over 0x80 are under '!' too.
  const __m128i bound = _mm_set1_epi8('!');
  const __m128i del = _mm_set1_epi8(0x7f);
  const __m128i colon = _mm_set1_epi8(':');
  while (last - first >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmplt_epi8(v, bound), _mm_cmpeq_epi8(v, del)), _mm_cmpeq_epi8(v, colon))));
    if (mask != 0) {
      return first + std::countr_zero(mask);
    }
    first += 16;
  }
#endif
  while (first != last && *first != ':' && static_cast<unsigned char>(*first) >= '!' &&
         static_cast<unsigned char>(*first) < 0x7f) {
    ++first;
  }
  return first;
}

/// `name`, of the literal's length (knownName() switches on it), equals `lower`, a
/// lower-case literal of letters and '-', ignoring case (knownName() says why OR-ing 0x20
/// is enough). Words of the name against words of the literal, which the compiler makes
/// constants: no call, no loop.
template <std::size_t N>
[[gnu::always_inline]] inline bool isName(std::string_view name, const char (&lower)[N]) {
  constexpr std::size_t n = N - 1;
  static_assert(n >= 4);
  const char* p = name.data();
  if constexpr (n >= 8) {
    // Words, the last overlapping the one before it.
    for (std::size_t k = 0; k + 8 < n; k += 8) {
      if ((words::load(p + k) | 0x20 * kOnes) != words::load(lower + k)) {
        return false;
      }
    }
    return (words::load(p + n - 8) | 0x20 * kOnes) == words::load(lower + n - 8);
  } else {
    // Two 4-byte words, the second overlapping the first.
    const auto word4 = [](const char* at) {
      std::uint32_t w = 0;
      std::memcpy(&w, at, 4);
      return w;
    };
    constexpr std::uint32_t kLowers = 0x20202020U;
    return (word4(p) | kLowers) == word4(lower) &&
           (word4(p + n - 4) | kLowers) == word4(lower + n - 4);
  }
}

/// The fields the plain form looks at, and the usual ones of a decision request.
enum class FieldName {
  kOther,
  kHost,
  kContentType,
  kContentLength,
  kConnection,
  kTransferEncoding,
  kUpgrade,
  kProxyConnection
};

/// Which of those `name` is, case ignored; kOther for any other name. `name` is visible
/// ASCII without ':' (nameEnd()): a byte of it that ORs 0x20 onto a lower-case letter or
/// '-' is that letter in either case, or '-' (CR, the other byte that ORs onto '-', is not
/// visible), so a name found here is a token without looking at each byte.
FieldName knownName(std::string_view name) {
  switch (name.size()) {
    case 4:
      return isName(name, "host") ? FieldName::kHost : FieldName::kOther;
    case 7:
      return isName(name, "upgrade") ? FieldName::kUpgrade : FieldName::kOther;
    case 10:
      return isName(name, "connection") ? FieldName::kConnection : FieldName::kOther;
    case 12:
      return isName(name, "content-type") ? FieldName::kContentType : FieldName::kOther;
    case 14:
      return isName(name, "content-length") ? FieldName::kContentLength : FieldName::kOther;
    case 16:
      return isName(name, "proxy-connection") ? FieldName::kProxyConnection : FieldName::kOther;
    case 17:
      return isName(name, "transfer-encoding") ? FieldName::kTransferEncoding : FieldName::kOther;
    default:
      return FieldName::kOther;
  }
}

/// Every byte of `name` is a tchar: four a step while four are left (one branch for four
/// table reads), then one at a time.
bool allTokens(std::string_view name) {
  const std::size_t n = name.size();
  std::size_t k = 0;
  for (; n - k >= 4; k += 4) {
    if (!(isToken(name[k]) & isToken(name[k + 1]) & isToken(name[k + 2]) & isToken(name[k + 3]))) {
      return false;
    }
  }
  for (; k < n; ++k) {
    if (!isToken(name[k])) {
      return false;
    }
  }
  return true;
}

/// s = v, keeping s's capacity (append's path copies without std::string's general replace).
void assign(std::string& s, std::string_view v) {
  s.clear();
  s.append(v.data(), v.size());
}

/// The request line's parts, as offsets into the data.
struct RequestLine {
  std::size_t method_start = 0;
  std::size_t method_end = 0;
  std::size_t target_start = 0;
  std::size_t target_end = 0;
  unsigned minor = 0;
};

/// METHOD SP target SP HTTP/1.x CRLF from `i` (moved past it); false when not that plain.
bool parseRequestLine(std::string_view data, std::size_t end, std::size_t& i, RequestLine& line) {
  const char* p = data.data();
  line.method_start = i;
  while (i < end && isToken(p[i])) {
    ++i;
  }
  if (i == line.method_start || i >= end || p[i] != ' ') {
    return false;
  }
  line.method_end = i++;
  line.target_start = i;
  // The target is visible ASCII up to the SP before the version.
  i = static_cast<std::size_t>(firstInvisible<false>(p + i, p + end) - p);
  if (i == line.target_start || i >= end || p[i] != ' ') {
    return false;
  }
  line.target_end = i++;
  // "HTTP/1." and the minor digit are one word (no call to memcmp), CRLF after it.
  constexpr std::size_t kHttp1 = sizeof "HTTP/1." - 1;
  constexpr std::uint64_t kPrefixBytes = 0x00ffffffffffffffULL;
  if (end - i < kHttp1 + 3 ||
      (words::load(p + i) & kPrefixBytes) != (words::load("HTTP/1.x") & kPrefixBytes)) {
    return false;
  }
  i += kHttp1;
  if (p[i] != '0' && p[i] != '1') {
    return false;
  }
  line.minor = static_cast<unsigned>(p[i] - '0');
  if (p[i + 1] != '\r' || p[i + 2] != '\n') {
    return false;
  }
  i += 3;
  return true;
}

/// One `name: value` CRLF field line from `i` (moved past it); false when not plain (no
/// obs-fold, visible ASCII, SP and HTAB only). The value has no surrounding blanks.
bool parseFieldLine(std::string_view data, std::size_t end, std::size_t& i, std::string_view& name,
                    FieldName& known, std::string_view& value) {
  const char* p = data.data();
  const std::size_t name_start = i;
  // The name ends at the ':' (a byte that is not visible ASCII before it: not plain). The
  // usual names are recognised whole, the others checked byte by byte.
  i = static_cast<std::size_t>(nameEnd(p + i, p + end) - p);
  if (i == name_start || i >= end || p[i] != ':') {
    return false;
  }
  name = data.substr(name_start, i - name_start);
  known = knownName(name);
  if (known == FieldName::kOther && !allTokens(name)) {
    return false;
  }
  ++i;
  while (i < end && isBlank(p[i])) {
    ++i;
  }
  const std::size_t value_start = i;
  // Field values are visible ASCII, SP and HTAB (Beast also takes obs-text: Beast's), up to
  // the CR of the line's end: one pass finds the end and checks the bytes before it.
  i = static_cast<std::size_t>(firstInvisible<true>(p + i, p + end) - p);
  std::size_t value_end = i;
  while (value_end > value_start && isBlank(p[value_end - 1])) {
    --value_end;
  }
  // CRLF, and a next line that does not start with a blank (obs-fold).
  if (i + 2 >= end || p[i] != '\r' || p[i + 1] != '\n' || isBlank(p[i + 2])) {
    return false;
  }
  i += 2;
  value = data.substr(value_start, value_end - value_start);
  return true;
}

/// What the fields Beast interprets say, read in their plainest forms only.
struct FieldFacts {
  int connection = 0;  ///< the first Connection field: 0 none, 1 close, 2 keep-alive
  bool has_length = false;
  std::uint64_t length = 0;
};

/// Notes a field Beast interprets in `facts`; false for a form left to Beast.
bool noteField(FieldName known, std::string_view value, FieldFacts& facts) {
  switch (known) {
    case FieldName::kContentLength:
      if (facts.has_length || value.empty() || value.size() > 18) {
        return false;
      }
      for (char c : value) {
        if (c < '0' || c > '9') {
          return false;
        }
        facts.length = facts.length * 10 + static_cast<std::uint64_t>(c - '0');
      }
      facts.has_length = true;
      return true;
    case FieldName::kConnection:
      // keepAlive(): the first Connection field decides.
      if (equalsIgnoreCase(value, "close")) {
        facts.connection = facts.connection == 0 ? 1 : facts.connection;
      } else if (equalsIgnoreCase(value, "keep-alive")) {
        facts.connection = facts.connection == 0 ? 2 : facts.connection;
      } else {
        return false;
      }
      return true;
    case FieldName::kTransferEncoding:
    case FieldName::kUpgrade:
    case FieldName::kProxyConnection:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::size_t parsePlainRequest(std::string_view data, const PlainLimits& limits, Request& request,
                              unsigned& version, bool& keep_alive) {
  // Nothing past the header limit is looked at: a head that does not end before it is
  // Beast's to refuse (431).
  const std::size_t end = data.size() < limits.header_bytes ? data.size() : limits.header_bytes;
  const char* p = data.data();
  std::size_t i = 0;
  RequestLine line;
  if (!parseRequestLine(data, end, i, line)) {
    return 0;
  }

  // Header fields, as views of `data` (the vector keeps its capacity).
  request.headers.clear();
  FieldFacts facts;
  for (;;) {
    if (i + 1 >= end) {
      return 0;
    }
    if (p[i] == '\r') {
      if (p[i + 1] != '\n') {
        return 0;
      }
      i += 2;
      break;
    }
    std::string_view name;
    std::string_view value;
    FieldName known = FieldName::kOther;
    if (!parseFieldLine(data, end, i, name, known, value) || !noteField(known, value, facts)) {
      return 0;
    }
    request.headers.push_back(RequestHeader{name, value});
  }

  // Body: exactly Content-Length bytes, all here.
  const std::uint64_t length = facts.length;
  if (facts.has_length && length >= limits.body_bytes) {
    return 0;
  }
  if (data.size() - i < length) {
    return 0;
  }
  assign(request.method, data.substr(line.method_start, line.method_end - line.method_start));
  assign(request.target, data.substr(line.target_start, line.target_end - line.target_start));
  assign(request.body, data.substr(i, static_cast<std::size_t>(length)));
  version = 10 + line.minor;
  keep_alive = facts.connection == 0 ? line.minor == 1 : facts.connection == 2;
  return i + static_cast<std::size_t>(length);
}

}  // namespace sluice::http
