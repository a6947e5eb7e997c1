# sluice_private_root(<module>): a directory holding one link, <module> -> src/<module>, so
# that "<module>/x.hpp" resolves for that module (and its tests) and for nobody else.
# Every module's private headers stay private to it (docs/architecture.md, "Layers").
function(sluice_private_root module out_var)
  set(root ${PROJECT_BINARY_DIR}/private/${module})
  if(NOT EXISTS ${root}/${module})
    file(MAKE_DIRECTORY ${root})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${module} ${root}/${module} SYMBOLIC)
  endif()
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()

# sluice_module(<target> <dir> PUBLIC_DEPS ... PRIVATE_DEPS ... EXTRA_SOURCES ...)
# Builds every .cpp below <dir> into one static library, so adding a file needs no CMake edit.
# Its include path is include/ (public headers, for it and its users) and its own private
# root: another module's src/ headers do not resolve.
function(sluice_module target dir)
  cmake_parse_arguments(ARG "" "" "PUBLIC_DEPS;PRIVATE_DEPS;EXTRA_SOURCES" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  list(APPEND sources ${ARG_EXTRA_SOURCES})
  if(NOT sources)
    set(placeholder ${CMAKE_CURRENT_BINARY_DIR}/${target}_empty.cpp)
    file(WRITE ${placeholder} "// ${target} has no sources yet\n")
    set(sources ${placeholder})
  endif()
  get_filename_component(module ${dir} NAME)
  sluice_private_root(${module} private_root)
  add_library(${target} STATIC ${sources})
  target_include_directories(${target}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${private_root})
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} Threads::Threads PRIVATE sluice_options ${ARG_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
endfunction()
