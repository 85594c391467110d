#!/usr/bin/env bash
# Builds milkit's binary wheel and sdist into dist/:
#   1. a PIC static protobuf-lite from Debian's source package (packaging/static-protobuf.sh, cached),
#   2. the wheel with scikit-build-core, protobuf-lite / OpenBLAS / minizip linked in statically and
#      only PyInit__core exported (-DMILKIT_STATIC_DEPS=ON),
#   3. auditwheel repair: checks that nothing but the manylinux base libraries is needed and gives
#      the wheel the platform tag its symbol versions allow (manylinux_2_NN),
#   4. the sdist (builds from source against the system's libraries).
#
#   packaging/wheel.sh [PYTHON] [ARCH]
#
# ARCH is a Debian architecture: the host's (default), or arm64, cross-compiled on an x86-64 Debian
# machine (`make wheel-aarch64`) with Debian's g++-aarch64-linux-gnu, the arm64 builds of the same
# -dev libraries and the target Python's headers (libpython3.X-dev:arm64; `make deps-aarch64`), and
# packaging/<triplet>.cmake as the CMake toolchain. The wheel is for the Python version of PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
build=${BUILD:-build}
arch=${2:-$(dpkg --print-architecture)}
triplet=$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
mach=${triplet%%-*}   # x86_64, aarch64: the machine part of the wheel's platform tag
deps="$build/wheel-deps/$arch"
raw="$build/wheel-raw/$arch"
cross=()
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  toolchain=packaging/$triplet.cmake
  [ -f "$toolchain" ] || { echo "no CMake toolchain for $arch: $toolchain" >&2; exit 2; }
  pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [ -f "/usr/include/$triplet/python$pyver/pyconfig.h" ] \
    || { echo "no $arch headers of Python $pyver: libpython$pyver-dev:$arch (make deps-aarch64)" >&2; exit 1; }
  soabi="cpython-${pyver/./}-$triplet"
  # scikit-build-core: the wheel's platform tag (linux_aarch64, which auditwheel below turns into
  # manylinux_2_NN_aarch64) and the extension's suffix (SKBUILD_SOABI; pybind11 reads it)
  export _PYTHON_HOST_PLATFORM="linux-$mach"
  export SETUPTOOLS_EXT_SUFFIX=".$soabi.so"
  # Python_INCLUDE_DIR: Debian's /usr/include/python3.X, whose pyconfig.h includes the target's
  # /usr/include/<triplet>/python3.X/pyconfig.h (scikit-build-core would pass the build Python's)
  cross=(-Ccmake.define.CMAKE_TOOLCHAIN_FILE="$(realpath "$toolchain")"
         -Ccmake.define.Python_INCLUDE_DIR="/usr/include/python$pyver"
         -Ccmake.define.Python_SOABI="$soabi")
fi
packaging/static-protobuf.sh "$deps" "$arch"
rm -rf "$raw" && mkdir -p "$raw" dist
# this architecture's wheel (the other architecture's stays) and the sdist
rm -f dist/milkit-*_"$mach".whl dist/milkit-*.tar.gz
# the sdist first; the wheel is built from it, so the sdist is known to be complete
"$py" -m build --sdist --no-isolation --outdir dist . >/dev/null
sdist=$(ls dist/milkit-*.tar.gz)
src="$build/wheel-src/$arch"
rm -rf "$src" && mkdir -p "$src" && tar -xzf "$sdist" -C "$src"
src=$(ls -d "$src"/milkit-*)
# the notices of what the extension links in statically (their licenses ask binaries to carry them)
{
  echo "milkit's binary wheel links these libraries into milkit/_core: their copyright files, as Debian ships them."
  for pkg in libprotobuf-dev libopenblas-pthread-dev libminizip-dev; do
    f=/usr/share/doc/$pkg/copyright
    [ -f "$f" ] || continue
    printf '\n==== %s (%s) ====\n\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg:$arch" 2>/dev/null || true)"
    cat "$f"
  done
} > "$src/LICENSE-THIRD-PARTY.txt"
# Its build tree sits one level below the unpacked sources, as build/ does below the checkout, so
# with CCACHE_BASEDIR above both (the Makefile sets it) the compiles are ccache hits of `make build`.
# No build isolation: the build tools are the ones requirements-dev.txt installed (no downloads).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
"$py" -m pip wheel "$src" --no-deps --no-build-isolation -w "$raw" \
  -Cbuild-dir=build-wheel \
  -Ccmake.define.MILKIT_STATIC_DEPS=ON \
  -Ccmake.define.MILKIT_PROTOBUF_LITE_STATIC="$(realpath "$deps/libprotobuf-lite.a")" \
  -Ccmake.build-type=Release "${cross[@]}"
whl=$(ls "$raw"/milkit-*.whl)
"$py" -m auditwheel repair -w dist "$whl"
"$py" -m auditwheel show dist/milkit-*manylinux*_"$mach".whl
ls -la dist/
