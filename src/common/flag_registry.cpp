#include "sluice/common/flag_registry.hpp"

#include <algorithm>
#include <stdexcept>

namespace sluice {
namespace {

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

std::string usage(const Flag& flag) {
  std::string left = "  --" + std::string(flag.name);
  if (!flag.metavar.empty()) {
    left += " " + std::string(flag.metavar);
  }
  return left;
}

}  // namespace

void FlagRegistry::section(std::string_view title) {
  sections_.push_back(Section{std::string(title), {}});
}

void FlagRegistry::add(Flag flag) {
  if (find(flag.name) != nullptr) {
    throw std::logic_error("flag --" + std::string(flag.name) + " is added twice");
  }
  if (sections_.empty()) {
    section("Flags");
  }
  sections_.back().flags.push_back(std::move(flag));
}

const Flag* FlagRegistry::find(std::string_view name) const {
  for (const Section& section : sections_) {
    for (const Flag& flag : section.flags) {
      if (flag.name == name) {
        return &flag;
      }
    }
  }
  return nullptr;
}

std::vector<const Flag*> FlagRegistry::flags() const {
  std::vector<const Flag*> all;
  for (const Section& section : sections_) {
    for (const Flag& flag : section.flags) {
      all.push_back(&flag);
    }
  }
  return all;
}

Result<std::vector<GivenFlag>> FlagRegistry::parseCommandLine(
    const std::vector<std::string>& args) const {
  std::vector<GivenFlag> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i] == "-h" ? std::string_view("--help") : args[i];
    if (!arg.starts_with("--")) {
      return invalid("unexpected argument \"" + std::string(arg) + "\" (see --help)");
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      value = std::string(name.substr(eq + 1));
      name = name.substr(0, eq);
    }
    const Flag* flag = find(name);
    if (flag == nullptr) {
      return invalid("unknown flag --" + std::string(name) + " (see --help)");
    }
    if (flag->metavar.empty()) {
      if (value) {
        return invalid("--" + std::string(name) + " takes no value");
      }
      value = "";
    } else if (!value) {
      if (i + 1 >= args.size()) {
        return invalid("--" + std::string(name) + " needs a value " + std::string(flag->metavar));
      }
      value = args[++i];
    }
    const auto previous = std::find_if(given.begin(), given.end(),
                                       [flag](const GivenFlag& g) { return g.flag == flag; });
    if (flag->repeatable && previous != given.end()) {
      previous->value += "," + *value;
      continue;
    }
    given.push_back(GivenFlag{flag, std::move(*value)});
  }
  return given;
}

Status FlagRegistry::applyEnvironment(const EnvironmentLookup& env) const {
  for (const Flag* flag : flags()) {
    if (flag->command_line_only) {
      continue;
    }
    const std::string name = environmentName(flag->name);
    if (auto value = env(name)) {
      if (auto status = flag->set(*value); !status) {
        return invalid(name + ": " + status.error().message);
      }
    }
  }
  return {};
}

const Flag* FlagRegistry::findConfigKey(std::string_view key) const {
  std::string name(key);
  std::replace(name.begin(), name.end(), '_', '-');
  const Flag* flag = find(name);
  return flag != nullptr && !flag->command_line_only ? flag : nullptr;
}

Status FlagRegistry::applyCommandLine(const std::vector<GivenFlag>& given) {
  for (const GivenFlag& g : given) {
    if (auto status = g.flag->set(g.value); !status) {
      return invalid("--" + std::string(g.flag->name) + ": " + status.error().message);
    }
  }
  return {};
}

std::string FlagRegistry::environmentName(std::string_view flag) {
  std::string name = "SLUICE_";
  for (char ch : flag) {
    name += ch == '-' ? '_' : (ch >= 'a' && ch <= 'z' ? static_cast<char>(ch - 'a' + 'A') : ch);
  }
  return name;
}

std::string FlagRegistry::helpText() const {
  std::size_t width = 0;
  for (const Flag* flag : flags()) {
    width = std::max(width, usage(*flag).size() + 2);
  }
  std::string text;
  for (const Section& section : sections_) {
    text += "\n" + section.title + ":\n";
    for (const Flag& flag : section.flags) {
      std::string left = usage(flag);
      left.resize(width, ' ');
      text += left + std::string(flag.help) + "\n";
    }
  }
  return text;
}

std::string FlagRegistry::envoyVariablesText() const {
  std::string text;
  for (const Flag* flag : flags()) {
    if (!flag->envoy_variables.empty()) {
      text += "  --" + std::string(flag->name) + " <- " + std::string(flag->envoy_variables) + "\n";
    }
  }
  return text;
}

namespace flag_setters {

FlagSetter text(std::string& target) {
  return [&target](std::string_view value) -> Status {
    auto text = parseNonEmpty(value);
    if (!text) {
      return text.error();
    }
    target = std::move(*text);
    return {};
  };
}

FlagSetter milliseconds(std::chrono::milliseconds& target, std::chrono::milliseconds min,
                        std::chrono::milliseconds max) {
  return [&target, min, max](std::string_view value) -> Status {
    auto ms = parseMilliseconds(value, min, max);
    if (!ms) {
      return ms.error();
    }
    target = *ms;
    return {};
  };
}

FlagSetter boolean(bool& target) {
  return [&target](std::string_view value) -> Status {
    auto on = parseBool(value);
    if (!on) {
      return on.error();
    }
    target = *on;
    return {};
  };
}

FlagSetter toggle(bool& target) {
  return [&target](std::string_view value) -> Status {
    if (value.empty()) {
      target = true;
      return {};
    }
    auto on = parseBool(value);
    if (!on) {
      return on.error();
    }
    target = *on;
    return {};
  };
}

FlagSetter oneOf(std::string& target, std::span<const std::string_view> allowed) {
  return [&target, allowed](std::string_view value) -> Status {
    auto word = parseOneOf(value, allowed);
    if (!word) {
      return word.error();
    }
    target = std::move(*word);
    return {};
  };
}

FlagSetter fileMode(unsigned& target) {
  return [&target](std::string_view value) -> Status {
    auto mode = parseFileMode(value);
    if (!mode) {
      return mode.error();
    }
    target = *mode;
    return {};
  };
}

}  // namespace flag_setters
}  // namespace sluice
