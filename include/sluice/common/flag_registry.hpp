#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/common/value_parsers.hpp"

/// The one registry of Sluice's settings: each module adds its flags, bound to the fields of
/// its own settings struct, with their help text and the environment variables that set them.
/// Every flag `--name` is also the variable SLUICE_NAME (dashes become underscores) and the
/// key `name` (or `na_me`) of the server YAML, unless it is for the command line only.
/// Precedence, lowest first: defaults, the server YAML, SLUICE_* variables, envoyproxy/
/// ratelimit's variables, flags (docs/configuration.md).
namespace sluice {

/// Sets a flag's value; the error says what is wrong with the value (the caller names the
/// flag, variable or file:line:column).
using FlagSetter = std::function<Status(std::string_view value)>;

struct Flag {
  std::string_view name{};     ///< "listen": --listen, SLUICE_LISTEN, `listen:` in the YAML
  std::string_view metavar{};  ///< "ADDRESSES" in --help; empty: a switch, given without value
  std::string_view help{};
  FlagSetter set{};
  bool command_line_only = false;  ///< not a variable nor a YAML key (--config, --help)
  bool repeatable = false;         ///< repeated on the command line, values join with ','
  /// envoyproxy/ratelimit's variables mapped onto this flag (docs/envoy.md), e.g.
  /// "HOST, PORT"; empty: none.
  std::string_view envoy_variables{};
};

/// A flag and the value the command line gave it.
struct GivenFlag {
  const Flag* flag = nullptr;
  std::string value;
};

/// Reads an environment variable; nullopt when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// Flags in the order they were added, grouped in sections for --help. Not thread-safe;
/// built, used and dropped by one parse. Setters hold references to the settings they fill:
/// the registry must not outlive them.
class FlagRegistry {
 public:
  /// Starts a section of --help ("HTTP", "Store", ...): the flags added next belong to it.
  void section(std::string_view title);
  /// Adds a flag. A name given twice is a programming error (std::logic_error).
  void add(Flag flag);

  const Flag* find(std::string_view name) const;
  /// Every flag, in order.
  std::vector<const Flag*> flags() const;

  /// Splits "--name value", "--name=value" and "-h" (--help). Errors: "unknown flag --x
  /// (see --help)", "--x needs a value METAVAR", "--x takes no value", "unexpected argument".
  Result<std::vector<GivenFlag>> parseCommandLine(const std::vector<std::string>& args) const;
  /// Applies SLUICE_* variables; errors begin with the variable's name.
  Status applyEnvironment(const EnvironmentLookup& env) const;
  /// The flag of a key of the server YAML ('_' and '-' alike); nullptr when no flag, or a
  /// command-line-only one, has that name.
  const Flag* findConfigKey(std::string_view key) const;
  /// Applies the command line; errors begin with "--name: ".
  static Status applyCommandLine(const std::vector<GivenFlag>& given);

  /// The variable of a flag: SLUICE_ and its name in upper case, '-' as '_'.
  static std::string environmentName(std::string_view flag);
  /// The flags' part of --help: one section after another, one line per flag.
  std::string helpText() const;
  /// "  --listen <- HOST, PORT" lines: envoyproxy/ratelimit's variables and their flags.
  std::string envoyVariablesText() const;

 private:
  struct Section {
    std::string title;
    std::vector<Flag> flags;
  };
  std::vector<Section> sections_;
};

/// Setters for the value types: each parses with the one parser of its type
/// (sluice/common/value_parsers.hpp) and stores the result in `target`.
namespace flag_setters {

/// Any non-empty text.
FlagSetter text(std::string& target);
/// An integer in [min, max].
template <typename T>
FlagSetter integer(T& target, T min, T max) {
  return [&target, min, max](std::string_view value) -> Status {
    auto n = parseInteger<T>(value, min, max);
    if (!n) {
      return n.error();
    }
    target = *n;
    return {};
  };
}
/// Whole milliseconds in [min, max] (the `-ms` flags).
FlagSetter milliseconds(std::chrono::milliseconds& target, std::chrono::milliseconds min,
                        std::chrono::milliseconds max);
/// A BOOL value that must be spelled out: true/false, 1/0, yes/no, on/off.
FlagSetter boolean(bool& target);
/// A switch: on without a value on the command line, or a BOOL from the variable or YAML.
FlagSetter toggle(bool& target);
/// One of a fixed list of words.
FlagSetter oneOf(std::string& target, std::span<const std::string_view> allowed);
/// One of the names of an enumeration, e.g. {{StoreKind::kMemory, "memory"}, ...}.
template <typename E, std::size_t N>
FlagSetter choice(E& target, const std::pair<E, std::string_view> (&names)[N]) {
  return [&target, &names](std::string_view value) -> Status {
    std::vector<std::string_view> words;
    for (const auto& [e, word] : names) {
      if (word == value) {
        target = e;
        return {};
      }
      words.push_back(word);
    }
    return parseOneOf(value, words).error();
  };
}
/// Octal permissions of a file.
FlagSetter fileMode(unsigned& target);

}  // namespace flag_setters
}  // namespace sluice
