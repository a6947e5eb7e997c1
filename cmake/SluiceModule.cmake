# sluice_module(<target> <dir> PUBLIC_DEPS ... PRIVATE_DEPS ... EXTRA_SOURCES ...)
# Builds every .cpp below <dir> into one static library, so adding a file needs no CMake edit.
function(sluice_module target dir)
  cmake_parse_arguments(ARG "" "" "PUBLIC_DEPS;PRIVATE_DEPS;EXTRA_SOURCES" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  list(APPEND sources ${ARG_EXTRA_SOURCES})
  if(NOT sources)
    set(placeholder ${CMAKE_CURRENT_BINARY_DIR}/${target}_empty.cpp)
    file(WRITE ${placeholder} "// ${target} has no sources yet\n")
    set(sources ${placeholder})
  endif()
  add_library(${target} STATIC ${sources})
  target_include_directories(${target}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} Threads::Threads PRIVATE sluice_options ${ARG_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
endfunction()
