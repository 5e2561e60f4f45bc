# hpu_version_script(<map> <ledger> <node prefix> <hide the rest: ON|OFF>)
#
# Generates the linker version script <map> from a ledger of C functions
# ("hpuName major.minor" lines, abi/*.txt): one stanza per version, named
# <prefix>_<major>_<minor>, each inheriting the one before; released stanzas
# never change. With <hide the rest> the first stanza ends with "local: *" (the
# library exports only the ledger); without it other symbols keep their default
# visibility, unversioned (libhpu-trainer's C++ API).
function(hpu_version_script map ledger prefix hide_rest)
  file(STRINGS ${ledger} lines REGEX "^hpu")
  set(versions "")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^([A-Za-z0-9_]+)[ \t]+([0-9]+\\.[0-9]+)" _ "${line}")
    list(APPEND syms_${CMAKE_MATCH_2} "${CMAKE_MATCH_1}")
    list(APPEND versions "${CMAKE_MATCH_2}")
  endforeach()
  list(REMOVE_DUPLICATES versions)
  file(RELATIVE_PATH from ${PROJECT_SOURCE_DIR} ${ledger})
  set(text "/* Generated from ${from} by CMake. */\n")
  set(previous "")
  foreach(v IN LISTS versions)
    string(REPLACE "." "_" tag "${prefix}_${v}")
    string(APPEND text "${tag} {\n  global:\n")
    foreach(sym IN LISTS syms_${v})
      string(APPEND text "    ${sym};\n")
    endforeach()
    if(NOT previous STREQUAL "")
      string(APPEND text "} ${previous};\n")
    elseif(hide_rest)
      string(APPEND text "  local: *;\n};\n")
    else()
      string(APPEND text "};\n")
    endif()
    set(previous "${tag}")
  endforeach()
  file(GENERATE OUTPUT ${map} CONTENT "${text}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ledger})
endfunction()
