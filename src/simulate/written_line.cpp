#include "simulate/written_line.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>

#include "simulate/json_cursor.hpp"

namespace sluice::simulate {
namespace {

/// The first `kSize` bytes at `p` and `text` are the same: compared eight bytes at a time
/// inline (the literals are short and known when compiling; memcmp would be a call).
template <typename Word>
bool sameWord(const char* p, const char* text) {
  Word a = 0;
  Word b = 0;
  std::memcpy(&a, p, sizeof(Word));
  std::memcpy(&b, text, sizeof(Word));
  return a == b;
}

/// The first `kSize` bytes at `p` and `text` are the same: compared a word at a time inline
/// (the last word overlapping the one before), as the literals are short and known when
/// compiling and memcmp would be a call.
template <std::size_t kSize>
bool sameBytes(const char* p, const char* text) {
  if constexpr (kSize >= 8) {
    for (std::size_t i = 0; i + 8 < kSize; i += 8) {
      if (!sameWord<std::uint64_t>(p + i, text + i)) {
        return false;
      }
    }
    return sameWord<std::uint64_t>(p + kSize - 8, text + kSize - 8);
  } else if constexpr (kSize >= 4) {
    return sameWord<std::uint32_t>(p, text) &&
           sameWord<std::uint32_t>(p + kSize - 4, text + kSize - 4);
  } else {
    for (std::size_t i = 0; i < kSize; ++i) {
      if (p[i] != text[i]) {
        return false;
      }
    }
    return true;
  }
}

/// Reads a written line front to back, by the literal bytes the writer puts between values.
class WrittenLine {
 public:
  explicit WrittenLine(std::string_view line) : at_(line.data()), end_(line.data() + line.size()) {}

  bool atEnd() const { return at_ == end_; }
  /// `text` next (consumed), else false.
  template <std::size_t N>
  bool literal(const char (&text)[N]) {
    constexpr std::size_t kSize = N - 1;
    if (static_cast<std::size_t>(end_ - at_) < kSize || !sameBytes<kSize>(at_, text)) {
      return false;
    }
    at_ += kSize;
    return true;
  }
  /// The rest of a string whose opening quote was read, up to its closing quote (consumed);
  /// false at a backslash (an escape: the general parser's) or without a closing quote.
  bool rest(std::string_view& out) {
    const std::size_t run = plainRun(at_, end_);
    if (at_ + run == end_ || at_[run] != '"') {
      return false;
    }
    out = std::string_view(at_, run);
    at_ += run + 1;
    return true;
  }
  bool rest(std::string& out) {
    if (at_ != end_ && *at_ == '"') {
      out.clear();  // "": an empty member (often the client, the rule, the hash)
      ++at_;
      return true;
    }
    std::string_view text;
    if (!rest(text)) {
      return false;
    }
    // clear() and append(): the same value as assign(), without assign()'s check for a
    // source inside the string itself (it never is here).
    out.clear();
    out.append(text.data(), text.size());
    return true;
  }
  /// An integer as JsonCursor::readInt takes it.
  bool integer(std::int64_t& out) {
    auto [ptr, ec] = std::from_chars(at_, end_, out);
    if (ec != std::errc() || ptr == at_ ||
        (ptr != end_ && (*ptr == '.' || *ptr == 'e' || *ptr == 'E'))) {
      return false;
    }
    at_ = ptr;
    return true;
  }
  /// A number as JsonCursor::skipValue skips it.
  bool number() {
    const char* start = at_;
    while (at_ != end_ && isNumberByte(*at_)) {
      ++at_;
    }
    return at_ != start;
  }

 private:
  const char* at_;
  const char* end_;
};

/// `[{"k":"v",...},...]` after its `[`, into the request's descriptors (reusing their
/// storage as readDescriptors does).
bool readDescriptors(WrittenLine& in, DecisionRequest& request) {
  std::vector<Descriptor>& descriptors = request.descriptors;
  std::size_t count = 0;
  if (!in.literal("]")) {
    do {
      if (!in.literal("{")) {
        return false;
      }
      if (count == descriptors.size()) {
        descriptors.emplace_back();
      }
      Descriptor& descriptor = descriptors[count++];
      std::size_t entries = 0;
      if (!in.literal("}")) {
        do {
          if (entries == descriptor.size()) {
            descriptor.emplace_back();
          }
          Entry& entry = descriptor[entries++];
          if (!in.literal("\"") || !in.rest(entry.key) || !in.literal(":\"") ||
              !in.rest(entry.value)) {
            return false;
          }
        } while (in.literal(","));
        if (!in.literal("}")) {
          return false;
        }
      }
      descriptor.resize(entries);
    } while (in.literal(","));
    if (!in.literal("]")) {
      return false;
    }
  }
  descriptors.resize(count);
  return true;
}

}  // namespace

bool parseWrittenLine(std::string_view line, LoggedRequest& out) {
  WrittenLine in(line);
  DecisionRequest& request = out.request;
  std::string_view when;
  if (!in.literal(R"({"time":")") || !in.rest(when) || !parseRfc3339(when, out.time_us)) {
    return false;
  }
  request.clearForReuse();
  if (!in.literal(R"(,"domain":")") || !in.rest(request.domain) || !in.literal(R"(,"client":")") ||
      !in.rest(request.client_id) || !in.literal(R"(,"descriptors":[)") ||
      !readDescriptors(in, request) || !in.literal(R"(,"hits":)") || !in.integer(request.hits) ||
      request.hits < 0) {
    return false;
  }
  // The optional members (descriptor_hits, charge, refund...) come here: such a line is the
  // general parser's.
  return in.literal(R"(,"rule":")") && in.rest(out.rule) && in.literal(R"(,"decision":")") &&
         in.rest(out.decision) && in.literal(R"(,"degraded":)") &&
         (in.literal("false") || in.literal("true")) && in.literal(R"(,"latency_us":)") &&
         in.number() && in.literal(R"(,"rules":")") && in.rest(out.rules_hash) && in.literal("}") &&
         in.atEnd();
}

}  // namespace sluice::simulate
