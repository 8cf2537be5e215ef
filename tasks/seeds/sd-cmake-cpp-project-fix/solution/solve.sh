#!/bin/bash
set -euo pipefail
cd /app/geom
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.16)
project(geom CXX)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)

enable_testing()

add_library(geom STATIC src/shapes.cpp src/area.cpp)
target_include_directories(geom PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:include>)

add_executable(geomcli app/main.cpp)
target_link_libraries(geomcli PRIVATE geom)

add_executable(test_geom tests/test_geom.cpp)
target_link_libraries(test_geom PRIVATE geom)
add_test(NAME geom_unit COMMAND test_geom)

install(TARGETS geomcli DESTINATION bin)
install(TARGETS geom ARCHIVE DESTINATION lib)
install(FILES include/geom/shapes.hpp DESTINATION include/geom)
CM
