# Warnings are errors in psflow's own code; third-party headers come in as SYSTEM includes.
set(PSFLOW_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Werror)

set(PSFLOW_SANITIZE_FLAGS "")
if(PSFLOW_SANITIZE STREQUAL "address")
  set(PSFLOW_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
elseif(PSFLOW_SANITIZE STREQUAL "thread")
  set(PSFLOW_SANITIZE_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
endif()
if(PSFLOW_SANITIZE_FLAGS)
  add_compile_options(${PSFLOW_SANITIZE_FLAGS})
  add_link_options(${PSFLOW_SANITIZE_FLAGS})
endif()

# PSFLOW_FUZZ: every object is built for libFuzzer (coverage feedback, ASan, UBSan), at -O1 with
# line tables and assertions on whatever the build type; tests/fuzz links its targets with
# -fsanitize=fuzzer. Only the `fuzzers` target is meant to be built in such a folder.
if(PSFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PSFLOW_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++), not "
                        "${CMAKE_CXX_COMPILER_ID}: libFuzzer is part of clang")
  endif()
  if(PSFLOW_SANITIZE_FLAGS)
    message(FATAL_ERROR "PSFLOW_FUZZ brings its own sanitizers: leave PSFLOW_SANITIZE empty")
  endif()
  add_compile_options(-O1 -gline-tables-only -UNDEBUG -fno-omit-frame-pointer
                      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# psflow_target(<target>): applies psflow's warning set and include root to one of our targets.
function(psflow_target target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PSFLOW_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# psflow_library(<name> SOURCES ... DEPS ...): a static library of psflow code.
function(psflow_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  psflow_target(${name})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# psflow_test(<name> SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s] [FIXTURES ...] [REAL_APISERVER]):
# one GoogleTest binary, registered with ctest test by test, labelled LABELS and `cc` (the label
# `long`: too slow to repeat under the sanitizers); FIXTURES are ctest fixtures its tests require.
# REAL_APISERVER: its tests run against the real Kubernetes control plane of tests/control_plane
# (the kube_control_plane fixture) and show as skipped when it has none.
function(psflow_test name)
  cmake_parse_arguments(ARG "REAL_APISERVER" "TIMEOUT" "SOURCES;DEPS;LABELS;FIXTURES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  psflow_target(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # Every GoogleTest binary's tests carry the label `cc` (scripts/sanitize.sh selects them).
  list(APPEND ARG_LABELS cc)
  set(properties TIMEOUT ${ARG_TIMEOUT})
  if(ARG_REAL_APISERVER)
    list(APPEND ARG_FIXTURES kube_control_plane)
    target_link_libraries(${name} PRIVATE psflow_control_plane)
    list(APPEND properties ENVIRONMENT "PSFLOW_CONTROL_PLANE_DIR=${PSFLOW_CONTROL_PLANE_DIR}"
         SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30 TEST_LIST ${name}_TESTS
                       PROPERTIES ${properties})
  # The list-valued properties (LABELS "e2e;cc", FIXTURES_REQUIRED) cannot go through
  # gtest_discover_tests: CMake 3.25 flattens its PROPERTIES, so "LABELS e2e cc ENVIRONMENT x"
  # reached set_tests_properties as LABELS=e2e, cc=ENVIRONMENT, ... and every property after the
  # labels was lost (the REAL_APISERVER tests ran without their fixture and skipped). ctest sets
  # them from this script, included after the file that adds the discovered tests.
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${name}_list_properties.cmake")
  set(list_properties "LABELS [==[${ARG_LABELS}]==]")
  if(ARG_FIXTURES)
    string(APPEND list_properties " FIXTURES_REQUIRED [==[${ARG_FIXTURES}]==]")
  endif()
  file(WRITE "${script}" "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES "
                         "${list_properties})\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
endfunction()
include(GoogleTest)

# psflow_json_code(<target>...): code that walks nlohmann::json objects. GCC 12's
# -Wnull-dereference reports nlohmann's own iterator constructors once they are inlined into
# find()/end() chains (a false positive inside the library); that one warning is off there.
function(psflow_json_code)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE -Wno-null-dereference)
  endforeach()
endfunction()
