#!/usr/bin/env bash
# Builds milkit's binary wheel and sdist into dist/:
#   1. a PIC static protobuf-lite from Debian's source package (packaging/static-protobuf.sh, cached),
#   2. the wheel with scikit-build-core, protobuf-lite / OpenBLAS / minizip linked in statically and
#      only PyInit__core exported (-DMILKIT_STATIC_DEPS=ON),
#   3. auditwheel repair: checks that nothing but the manylinux base libraries is needed and gives
#      the wheel the platform tag its symbol versions allow (manylinux_2_NN),
#   4. the sdist (builds from source against the system's libraries).
#
#   packaging/wheel.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
build=${BUILD:-build}
arch=$(dpkg --print-architecture)
deps="$build/wheel-deps/$arch"
raw="$build/wheel-raw"
packaging/static-protobuf.sh "$deps" "$arch"
rm -rf "$raw" && mkdir -p "$raw" dist
rm -f dist/milkit-*.whl dist/milkit-*.tar.gz
# the sdist first; the wheel is built from it, so the sdist is known to be complete
"$py" -m build --sdist --no-isolation --outdir dist . >/dev/null
sdist=$(ls dist/milkit-*.tar.gz)
src="$build/wheel-src"
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
  -Ccmake.build-type=Release
whl=$(ls "$raw"/milkit-*.whl)
"$py" -m auditwheel repair -w dist "$whl"
"$py" -m auditwheel show dist/milkit-*manylinux*.whl
ls -la dist/
