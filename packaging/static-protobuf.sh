#!/usr/bin/env bash
# Builds a position-independent static libprotobuf-lite.a from Debian's source package of the very
# protobuf version whose headers and protoc are installed (Debian's own libprotobuf.a is not PIC, so
# it cannot go into a Python extension). The result is cached: OUT/libprotobuf-lite.a.
#
#   packaging/static-protobuf.sh OUT [ARCH]       ARCH: a Debian architecture (default: the host's)
#
# For a foreign ARCH it builds with ARCH's GNU cross compiler (g++-<triplet>).
set -euo pipefail
out=$(realpath -m "$1")
arch=${2:-$(dpkg --print-architecture)}
lib="$out/libprotobuf-lite.a"
# the version of the headers milkit compiles against: the -dev package for the target architecture
version=$(dpkg-query -W -f='${Version}' "libprotobuf-dev:$arch")
stamp="$out/.version"
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "static protobuf-lite $version ($arch): $lib (cached)"
  exit 0
fi
mkdir -p "$out"
src_root="$out/src"
# the source package comes from Debian's archive (deb-src lines for the archive apt already uses)
if ! apt-get source --print-uris "protobuf=$version" >/dev/null 2>&1; then
  list=/etc/apt/sources.list.d/milkit-deb-src.sources
  echo "adding Debian source lines: $list"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  $SUDO tee "$list" >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $SUDO apt-get update -qq
fi
rm -rf "$src_root" && mkdir -p "$src_root"
(cd "$src_root" && apt-get source -qq "protobuf=$version" >/dev/null 2>&1)
src=$(find "$src_root" -maxdepth 1 -mindepth 1 -type d -name 'protobuf-*' | head -1)
[ -n "$src" ] || { echo "apt-get source protobuf=$version gave no source tree" >&2; exit 1; }

cross=()
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  triplet=$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null)
  cross=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR="${triplet%%-*}"
         -DCMAKE_C_COMPILER="$triplet-gcc" -DCMAKE_CXX_COMPILER="$triplet-g++")
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$out/build" -G Ninja -Wno-deprecated -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CXX_VISIBILITY_PRESET=hidden \
  -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF \
  -Dprotobuf_WITH_ZLIB=OFF -Dprotobuf_INSTALL=OFF "${cross[@]}" "${launcher[@]}" >/dev/null
cmake --build "$out/build" --target libprotobuf-lite -j"${JOBS:-2}" >/dev/null
cp "$out/build/libprotobuf-lite.a" "$lib"
echo "$version" > "$stamp"
rm -rf "$src_root" "$out/build"
echo "static protobuf-lite $version ($arch): $lib"
