#include "sluice/common/yaml_syntax.hpp"

#include <cstdint>
#include <vector>

namespace sluice {
namespace {

/// c-printable (YAML 1.2 §5.1): tab, LF, CR, x20-x7E, NEL, xA0-xD7FF, xE000-xFFFD,
/// x10000-x10FFFF.
bool printable(std::uint32_t c) {
  return c == 0x09 || c == 0x0A || c == 0x0D || (c >= 0x20 && c <= 0x7E) || c == 0x85 ||
         (c >= 0xA0 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

std::string hexCode(std::uint32_t c) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out = "U+";
  for (int shift = c > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4) {
    out += kDigits[(c >> shift) & 0xF];
  }
  return out;
}

/// The first byte sequence that is not UTF-8 or not c-printable.
std::optional<LocatedError> checkCharacters(const std::string& file, std::string_view s) {
  int line = 1;
  int column = 1;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::uint32_t c = b;
    std::size_t len = 1;
    if (b >= 0x80) {
      std::uint32_t min = 0;
      if ((b & 0xE0) == 0xC0) {
        len = 2, c = b & 0x1F, min = 0x80;
      } else if ((b & 0xF0) == 0xE0) {
        len = 3, c = b & 0x0F, min = 0x800;
      } else if ((b & 0xF8) == 0xF0) {
        len = 4, c = b & 0x07, min = 0x10000;
      } else {
        len = 0;
      }
      bool ok = len != 0 && i + len <= s.size();
      for (std::size_t k = 1; ok && k < len; ++k) {
        const auto cont = static_cast<unsigned char>(s[i + k]);
        ok = (cont & 0xC0) == 0x80;
        c = (c << 6) | (cont & 0x3F);
      }
      if (!ok || c < min || (c >= 0xD800 && c <= 0xDFFF)) {
        return LocatedError{{file, line, column}, "YAML syntax error: bytes that are not UTF-8"};
      }
    }
    if (!printable(c)) {
      return LocatedError{{file, line, column},
                          "YAML syntax error: character " + hexCode(c) +
                              " is not allowed in YAML (control characters other than tab, "
                              "line feed and carriage return)"};
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
  return std::nullopt;
}

enum class Kind { kKey, kPlain, kSequence };

struct Level {
  int column = 0;  ///< 0-based
  Kind kind = Kind::kKey;
  int line = 0;  ///< where it started (1-based), for the error
};

bool blankOrComment(std::string_view rest) {
  for (char ch : rest) {
    if (ch == '#') {
      return true;
    }
    if (ch != ' ' && ch != '\t') {
      return false;
    }
  }
  return true;
}

/// `|`, `>`, with indentation and chomping indicators, then only a comment.
bool blockScalarHeader(std::string_view rest) {
  std::size_t i = 0;
  while (i < rest.size() && rest[i] == ' ') {
    ++i;
  }
  if (i >= rest.size() || (rest[i] != '|' && rest[i] != '>')) {
    return false;
  }
  ++i;
  while (i < rest.size() &&
         (rest[i] == '+' || rest[i] == '-' || (rest[i] >= '1' && rest[i] <= '9'))) {
    ++i;
  }
  return i == rest.size() || rest[i] == ' ' || rest[i] == '\t';
}

class StructureScanner {
 public:
  explicit StructureScanner(const std::string& file) : file_(file) {}

  std::optional<LocatedError> scan(std::string_view content) {
    int number = 0;
    std::size_t start = 0;
    while (start <= content.size()) {
      std::size_t end = content.find('\n', start);
      if (end == std::string_view::npos) {
        end = content.size();
      }
      std::string_view line = content.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
      }
      ++number;
      if (auto error = scanLine(line, number)) {
        return error;
      }
      if (end == content.size()) {
        break;
      }
      start = end + 1;
    }
    if (quote_ != 0) {
      return LocatedError{{file_, quote_line_, quote_column_ + 1},
                          std::string("YAML syntax error: unterminated quoted scalar (the ") +
                              quote_ + " opened here is never closed)"};
    }
    if (directive_line_ != 0) {
      return LocatedError{{file_, directive_line_, 1},
                          "YAML syntax error: a directive must be followed by '---'"};
    }
    return std::nullopt;
  }

 private:
  std::optional<LocatedError> scanLine(std::string_view line, int number) {
    int indent = 0;
    while (indent < static_cast<int>(line.size()) &&
           line[static_cast<std::size_t>(indent)] == ' ') {
      ++indent;
    }
    if (block_scalar_parent_) {
      if (blankOrComment(line.substr(static_cast<std::size_t>(indent))) &&
          line.find_first_not_of(" \t") == std::string_view::npos) {
        return std::nullopt;
      }
      if (indent > *block_scalar_parent_) {
        return std::nullopt;
      }
      block_scalar_parent_.reset();
    }
    const bool inside = quote_ != 0 || flow_depth_ > 0;
    if (!inside) {
      const std::string_view rest = line.substr(static_cast<std::size_t>(indent));
      if (blankOrComment(rest)) {
        return std::nullopt;
      }
      if (rest.front() == '\t') {
        return LocatedError{{file_, number, indent + 1},
                            "YAML syntax error: a tab in the indentation (indent with spaces)"};
      }
      if (directive_line_ != 0) {
        if (!(indent == 0 && rest.starts_with("---"))) {
          return LocatedError{{file_, directive_line_, 1},
                              "YAML syntax error: a directive must be followed by '---'"};
        }
        directive_line_ = 0;
      }
      if (indent == 0 && (rest.starts_with("---") || rest.starts_with("..."))) {
        levels_.clear();
        return scanTokens(line, 3, number, nullptr);
      }
      if (indent == 0 && rest.front() == '%') {
        directive_line_ = number;
        return std::nullopt;
      }
      return scanBlockLine(line, indent, number);
    }
    return scanTokens(line, 0, number, nullptr);
  }

  /// A line that starts in block context: sequence indicators, then one node.
  std::optional<LocatedError> scanBlockLine(std::string_view line, int indent, int number) {
    std::size_t pos = static_cast<std::size_t>(indent);
    bool dashed = false;
    if (auto error = scanDashes(line, number, pos, dashed)) {
      return error;
    }
    const int column = static_cast<int>(pos);
    const std::string_view rest = line.substr(pos);
    if (rest.empty() || blankOrComment(rest)) {
      return std::nullopt;
    }
    if (blockScalarHeader(rest)) {
      block_scalar_parent_ = dashed ? column - 2 : levels_.empty() ? -1 : levels_.back().column;
      return std::nullopt;
    }
    // A line that may continue a plain scalar: a quote at its start is plain text.
    continuation_ = !dashed && !levels_.empty() && levels_.back().kind == Kind::kPlain;
    bool key = false;
    std::optional<LocatedError> error = scanTokens(line, pos, number, &key);
    if (error) {
      return error;
    }
    const char first = rest.front();
    const bool other = std::string_view("?:&*!|>%@`[{").find(first) != std::string_view::npos;
    if (!key && (other || first == '\'' || first == '"')) {
      return std::nullopt;  // not classified: yaml-cpp judges it
    }
    const Kind kind = key ? Kind::kKey : Kind::kPlain;
    if (!dashed && kind == Kind::kPlain && !levels_.empty() &&
        levels_.back().kind == Kind::kPlain) {
      // Another line of a multi-line plain scalar: any indentation deeper than its parent's.
      const int parent = levels_.size() > 1 ? levels_[levels_.size() - 2].column : -1;
      if (column > parent) {
        return std::nullopt;
      }
    }
    if (std::string_view(",]}@`").find(first) != std::string_view::npos) {
      return cannotStart(number, column, first);
    }
    return placeNode(number, column, kind, dashed);
  }

  /// Sequence indicators ("- ") from `pos` (moved past them), each opening or continuing a
  /// sequence level; `dashed` when there was one.
  std::optional<LocatedError> scanDashes(std::string_view line, int number, std::size_t& pos,
                                         bool& dashed) {
    while (pos < line.size() && line[pos] == '-' &&
           (pos + 1 == line.size() || line[pos + 1] == ' ')) {
      const int dash = static_cast<int>(pos);
      if (popDeeperThan(dash) && (levels_.empty() || levels_.back().column < dash)) {
        return badIndentation(number, dash);
      }
      // A sequence at the column of its key (the compact form "key:\n- a") stacks on the
      // key's level; a key line at that column closes it again.
      if (levels_.empty() || levels_.back().column != dash ||
          levels_.back().kind != Kind::kSequence) {
        levels_.push_back({dash, Kind::kSequence, number});
      }
      dashed = true;
      ++pos;
      while (pos < line.size() && line[pos] == ' ') {
        ++pos;
      }
    }
    return std::nullopt;
  }

  /// A key or plain scalar at `column`: checked against the levels open, then one of them.
  std::optional<LocatedError> placeNode(int number, int column, Kind kind, bool dashed) {
    if (!dashed) {
      if (popDeeperThan(column) && (levels_.empty() || levels_.back().column < column)) {
        return badIndentation(number, column);
      }
      if (!levels_.empty() && levels_.back().column == column &&
          levels_.back().kind == Kind::kSequence) {
        // Only the compact form "key:\n- item\nkey2:" has a sequence at a key's column.
        levels_.pop_back();
        if (levels_.empty() || levels_.back().column != column ||
            levels_.back().kind != Kind::kKey || kind != Kind::kKey) {
          return LocatedError{{file_, number, column + 1},
                              "YAML syntax error: expected '- ' (a sequence item) at this "
                              "indentation"};
        }
      }
    }
    if (!levels_.empty() && levels_.back().column == column) {
      const Level& level = levels_.back();
      if (level.kind == Kind::kKey && kind == Kind::kPlain) {
        return LocatedError{{file_, number, column + 1},
                            "YAML syntax error: could not find expected ':' (a plain scalar stands "
                            "where the mapping's next key should; a value continued on another "
                            "line must be indented more than its key)"};
      }
      if (level.kind == Kind::kPlain && kind == Kind::kKey) {
        return LocatedError{{file_, level.line, column + 1},
                            "YAML syntax error: could not find expected ':' (line " +
                                std::to_string(number) +
                                " is a key at the indentation of this line)"};
      }
      return std::nullopt;
    }
    popDeeperThan(column);
    levels_.push_back({column, kind, number});
    return std::nullopt;
  }

  /// True when a level was closed (the line is less indented than the one before).
  bool popDeeperThan(int column) {
    bool popped = false;
    while (!levels_.empty() && levels_.back().column > column) {
      levels_.pop_back();
      popped = true;
    }
    return popped;
  }

  LocatedError cannotStart(int number, int column, char c) const {
    return LocatedError{{file_, number, column + 1},
                        std::string("YAML syntax error: unexpected '") + c + "'"};
  }

  LocatedError badIndentation(int number, int column) const {
    return LocatedError{{file_, number, column + 1},
                        "YAML syntax error: bad indentation (less indented than the line before, "
                        "but not lined up with an enclosing key or sequence item)"};
  }

  /// Quotes, flow brackets and comments from `pos` on; sets *key when a block mapping's
  /// ':' is found outside them (and notes a block scalar header after it).
  std::optional<LocatedError> scanTokens(std::string_view line, std::size_t pos, int number,
                                         bool* key) {
    const bool block_start = quote_ == 0 && flow_depth_ == 0;
    // A quote opens a quoted scalar only where a node starts: inside a plain scalar
    // ("it's", "a 'b'") it is an ordinary character.
    bool node_start = quote_ == 0 && (pos > 0 || !continuation_);
    if (pos == 0 && flow_depth_ > 0) {
      node_start = flow_node_start_;
    }
    for (std::size_t i = pos; i < line.size(); ++i) {
      const char c = line[i];
      if (quote_ != 0) {
        skipQuoted(line, i);
        continue;
      }
      if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        break;
      }
      if (c == ' ' || c == '\t') {
        continue;
      }
      if ((c == '\'' || c == '"') && node_start) {
        quote_ = c;
        quote_line_ = number;
        quote_column_ = static_cast<int>(i);
        node_start = false;
        continue;
      }
      if ((c == '[' || c == '{') && (node_start || flow_depth_ > 0)) {
        ++flow_depth_;
        node_start = true;
        continue;
      }
      if (flow_depth_ > 0 && (c == ',' || c == '?')) {
        node_start = true;
        continue;
      }
      if ((c == ']' || c == '}') && flow_depth_ > 0) {
        --flow_depth_;
        node_start = false;
        continue;
      }
      if (c == ':' &&
          (i + 1 == line.size() || line[i + 1] == ' ' || line[i + 1] == '\t' ||
           (flow_depth_ > 0 && (line[i + 1] == ',' || line[i + 1] == ']' || line[i + 1] == '}')))) {
        node_start = true;
      } else if ((c == '&' || c == '!') && node_start) {
        // An anchor or a tag: the node follows the next space.
        while (i + 1 < line.size() && line[i + 1] != ' ' && line[i + 1] != '\t') {
          ++i;
        }
        continue;
      } else {
        node_start = false;
      }
      if (c == ':' && key != nullptr && block_start && flow_depth_ == 0 && !*key &&
          (i + 1 == line.size() || line[i + 1] == ' ' || line[i + 1] == '\t')) {
        *key = true;
        if (blockScalarHeader(line.substr(i + 1))) {
          block_scalar_parent_ = static_cast<int>(pos);
          return std::nullopt;
        }
        if (auto error = checkValueStart(line, i + 1, number)) {
          return error;
        }
      }
    }
    flow_node_start_ = node_start;
    return std::nullopt;
  }

  /// Inside a quoted scalar at line[i]: ends it at its closing quote ('' and \" are
  /// escapes, skipped with `i`).
  void skipQuoted(std::string_view line, std::size_t& i) {
    const char c = line[i];
    if (quote_ == '\'') {
      if (c == '\'') {
        if (i + 1 < line.size() && line[i + 1] == '\'') {
          ++i;
        } else {
          quote_ = 0;
        }
      }
      return;
    }
    if (c == '\\') {
      ++i;
    } else if (c == '"') {
      quote_ = 0;
    }
  }

  /// A block mapping's value after its ':' at `from` may not start with an indicator that
  /// cannot start a plain scalar.
  std::optional<LocatedError> checkValueStart(std::string_view line, std::size_t from,
                                              int number) const {
    const std::size_t value = line.find_first_not_of(" \t", from);
    if (value != std::string_view::npos &&
        std::string_view(",]}@`%").find(line[value]) != std::string_view::npos) {
      return cannotStart(number, static_cast<int>(value), line[value]);
    }
    return std::nullopt;
  }

  const std::string& file_;
  char quote_ = 0;  ///< the open quote ('\'' or '"'), 0 outside quotes
  int quote_line_ = 0;
  int quote_column_ = 0;  ///< 0-based
  int flow_depth_ = 0;
  std::optional<int> block_scalar_parent_;  ///< content lines are indented more than this
  int directive_line_ = 0;                  ///< a directive waiting for its '---'
  bool continuation_ = false;               ///< the line may continue a plain scalar
  bool flow_node_start_ = false;            ///< a flow line ended where a node may start
  std::vector<Level> levels_;
};

}  // namespace

std::optional<LocatedError> checkYamlSyntax(const std::string& file, std::string_view content) {
  if (auto error = checkCharacters(file, content)) {
    return error;
  }
  return StructureScanner(file).scan(content);
}

}  // namespace sluice
