# sluice_embed_lua(<out-var> <lua-dir>)
# Turns every <lua-dir>/*.lua into a generated C++ source defining
#   std::string_view sluice::lua::script(std::string_view name)   (name without .lua; "" if unknown)
#   const std::vector<std::string_view>& sluice::lua::scriptNames()
# so the scripts ship inside the binary and are edited as plain Lua files.
function(sluice_embed_lua out_var lua_dir)
  file(GLOB lua_files CONFIGURE_DEPENDS ${lua_dir}/*.lua)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/sluice_lua_scripts.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DLUA_DIR=${lua_dir} -P ${PROJECT_SOURCE_DIR}/cmake/GenerateLua.cmake
    DEPENDS ${lua_files} ${PROJECT_SOURCE_DIR}/cmake/GenerateLua.cmake
    COMMENT "Embedding Lua scripts")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
