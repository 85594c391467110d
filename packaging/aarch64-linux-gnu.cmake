# CMake toolchain for cross-compiling to aarch64 Linux on a Debian (or Ubuntu) machine with multiarch:
# Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64 builds of the -dev libraries
# (libprotobuf-dev:arm64, ...; `make deps-aarch64` installs them). Debian's cross compiler searches
# /usr/include/aarch64-linux-gnu, /usr/include and /usr/lib/aarch64-linux-gnu itself, so the "sysroot"
# is / and the target's libraries are told apart by their multiarch directory, not by a root path.
# Programs (protoc, python, pkg-config) are the build machine's.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=packaging/aarch64-linux-gnu.cmake ...   (packaging/wheel.sh arm64)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(MILKIT_TARGET_TRIPLET aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${MILKIT_TARGET_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${MILKIT_TARGET_TRIPLET}-g++)
set(CMAKE_AR ${MILKIT_TARGET_TRIPLET}-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${MILKIT_TARGET_TRIPLET}-ranlib CACHE FILEPATH "")
set(CMAKE_STRIP ${MILKIT_TARGET_TRIPLET}-strip CACHE FILEPATH "")

# find_library / find_path / find_package search <prefix>/lib/aarch64-linux-gnu and
# <prefix>/include/aarch64-linux-gnu (where the :arm64 packages put their libraries, cblas.h and
# pyconfig.h); the build machine's x86_64-linux-gnu directories are never searched.
set(CMAKE_LIBRARY_ARCHITECTURE ${MILKIT_TARGET_TRIPLET})
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# BOTH: pybind11's CMake package lives in the build machine's Python (site-packages)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# nothing may fall back to the build machine's libraries in /usr/lib (x86-64 .so's there would
# only fail at link time, with a less helpful message)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu)

# pkg-config for the target: Debian's <triplet>-pkg-config (pkgconf:arm64) reads the arm64 .pc files
set(PKG_CONFIG_EXECUTABLE /usr/bin/${MILKIT_TARGET_TRIPLET}-pkg-config CACHE FILEPATH "")
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${MILKIT_TARGET_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
