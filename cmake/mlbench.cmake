# Helpers shared by the component CMakeLists files.

# The build's git commit, regenerated on every build but rewritten only when it
# changes, so a commit relinks what embeds it and nothing else.
set(MLBENCH_BUILD_INFO_CC ${CMAKE_BINARY_DIR}/generated/build_info.cc)
add_custom_target(mlbench_build_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUT=${MLBENCH_BUILD_INFO_CC}
          -DVERSION=${PROJECT_VERSION} -P ${CMAKE_SOURCE_DIR}/cmake/build_info.cmake
  BYPRODUCTS ${MLBENCH_BUILD_INFO_CC}
  COMMENT "" VERBATIM)

# mlbench_source_hash(<target> <header> <files...>): writes <header> defining
# MLBENCH_SOURCE_HASH, the sha256 of the given sources, regenerated when they change.
function(mlbench_source_hash target header)
  set(files ${ARGN})
  list(TRANSFORM files PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  add_custom_command(OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DOUT=${header} "-DFILES=${files}" -P ${CMAKE_SOURCE_DIR}/cmake/source_hash.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/source_hash.cmake
    VERBATIM)
  target_sources(${target} PRIVATE ${header})
  get_filename_component(dir ${header} DIRECTORY)
  target_include_directories(${target} PRIVATE ${dir})
endfunction()
