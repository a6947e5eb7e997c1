#pragma once

#include <string_view>
#include <vector>

/// The Lua sources of src/store/redis/lua/*.lua, embedded at build time by
/// cmake/EmbedLua.cmake (the definitions are generated).
namespace sluice::lua {

/// The text of `<name>.lua` (name without the extension); empty when there is none.
std::string_view script(std::string_view name);
/// Every embedded script name, sorted.
const std::vector<std::string_view>& scriptNames();

}  // namespace sluice::lua
