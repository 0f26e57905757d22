# Dependencies of the trainer-only build (VITSIM_TRAINER_ONLY): fmt, nlohmann-json, CLI11 and pugixml
# from the system when found, else from VITSIM_DEPS_DIR (bench/gpu/pack_deps.sh: include/ + lib/, fmt
# used header-only); zlib, libjpeg and libpng likewise through CMake's Find modules. With
# VITSIM_PREFER_DEPS the folder wins over the system (to test here what a bare GPU image sees).
set(VITSIM_DEPS_DIR "" CACHE PATH "Folder with include/ and lib/ for what the system lacks (bench/gpu/pack_deps.sh)")
option(VITSIM_PREFER_DEPS "Take the trainer's dependencies from VITSIM_DEPS_DIR even where the system has them" OFF)

set(_deps "")
if(VITSIM_DEPS_DIR)
  get_filename_component(_deps "${VITSIM_DEPS_DIR}" ABSOLUTE BASE_DIR "${CMAKE_SOURCE_DIR}")
  if(NOT EXISTS "${_deps}/include")
    message(FATAL_ERROR "VITSIM_DEPS_DIR=${VITSIM_DEPS_DIR}: no include/ folder there (run bench/gpu/pack_deps.sh)")
  endif()
  if(VITSIM_PREFER_DEPS)
    list(PREPEND CMAKE_PREFIX_PATH "${_deps}")      # searched before the system folders
  else()
    list(APPEND CMAKE_SYSTEM_PREFIX_PATH "${_deps}")  # searched after them
  endif()
elseif(VITSIM_PREFER_DEPS)
  message(FATAL_ERROR "VITSIM_PREFER_DEPS needs VITSIM_DEPS_DIR")
endif()

# vitsim_dep_from_folder(NAME FILE): fails clearly unless the deps folder holds FILE.
function(vitsim_dep_from_folder name file)
  if(NOT _deps OR NOT EXISTS "${_deps}/${file}")
    message(FATAL_ERROR "vitsim: ${name} not found on the system, nor ${file} in VITSIM_DEPS_DIR "
                        "('${VITSIM_DEPS_DIR}'): run bench/gpu/pack_deps.sh on a Debian machine that has it")
  endif()
  message(STATUS "vitsim: ${name} from ${_deps}")
endfunction()

macro(vitsim_find pkg target)
  if(NOT VITSIM_PREFER_DEPS)
    find_package(${pkg} QUIET)
  endif()
  if(TARGET ${target})
    message(STATUS "vitsim: ${pkg} from the system")
  endif()
endmacro()

vitsim_find(fmt fmt::fmt)
if(NOT TARGET fmt::fmt)
  vitsim_dep_from_folder(fmt include/fmt/format-inl.h)
  add_library(fmt::fmt INTERFACE IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_deps}/include"
                                            INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
endif()

vitsim_find(nlohmann_json nlohmann_json::nlohmann_json)
if(NOT TARGET nlohmann_json::nlohmann_json)
  vitsim_dep_from_folder(nlohmann_json include/nlohmann/json.hpp)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_deps}/include")
endif()

vitsim_find(CLI11 CLI11::CLI11)
if(NOT TARGET CLI11::CLI11)
  vitsim_dep_from_folder(CLI11 include/CLI/CLI.hpp)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_deps}/include")
endif()

vitsim_find(pugixml pugixml::pugixml)
if(NOT TARGET pugixml::pugixml)
  vitsim_dep_from_folder(pugixml lib/libpugixml.a)
  add_library(pugixml::pugixml STATIC IMPORTED)
  set_target_properties(pugixml::pugixml PROPERTIES IMPORTED_LOCATION "${_deps}/lib/libpugixml.a"
                                                    INTERFACE_INCLUDE_DIRECTORIES "${_deps}/include")
endif()

# zlib, libjpeg, libpng: real/CMakeLists.txt's find_package calls see the folder through the prefix
# paths set above (static libraries there, as the folder holds no shared ones).
