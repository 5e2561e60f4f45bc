#!/bin/sh
# Installs the build into a temporary prefix, then builds and runs against it:
# a C program via pkg-config, a C++ program via find_package(hpu), and a
# program that only dlopen()s libhpu.so.<major>; and checks that man finds the
# installed pages.
#   usage: check_consumers.sh <build dir> <tests/abi dir> <cc> <c++> <version> <major>
set -eu
build=$1 here=$2 cc=$3 cxx=$4 version=$5 major=$6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpu-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
# The consumers run with the default configuration, whatever the caller's.
for v in $(env | sed -n 's/^\(HPU_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$prefix" -name hpu.pc)
[ -n "$pc" ] || fail "no hpu.pc under $prefix"
lib=$(find "$prefix" -name "libhpu.so.$major" | head -n 1)
[ -n "$lib" ] || fail "no libhpu.so.$major under $prefix"

echo "== pkg-config ($pc)"
export PKG_CONFIG_PATH="$(dirname "$pc")"
got=$(pkg-config --modversion hpu)
[ "$got" = "$version" ] || fail "pkg-config --modversion hpu is $got, expected $version"
libdir=$(pkg-config --variable=libdir hpu)
incdir=$(pkg-config --variable=includedir hpu)
[ "$(realpath "$libdir")" = "$(realpath "$(dirname "$lib")")" ] || fail "hpu.pc libdir $libdir is not where the library is"
[ -f "$incdir/hpu/hpu.h" ] || fail "hpu.pc includedir $incdir holds no hpu/hpu.h"
# shellcheck disable=SC2046
"$cc" -Wall -Wextra -Werror "$here/consumer/pkgconfig.c" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs hpu) ||
  fail "the pkg-config consumer does not build"
LD_LIBRARY_PATH=$libdir "$tmp/pc_consumer" || fail "the pkg-config consumer failed"

echo "== find_package(hpu)"
cmake -S "$here/consumer/cmake" -B "$tmp/cmake" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DHPU_PREFIX="$prefix" -DHPU_EXPECTED_VERSION="$version" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "the find_package consumer does not configure"; }
cmake --build "$tmp/cmake" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; fail "the find_package consumer does not build"; }
"$tmp/cmake/consumer" || fail "the find_package consumer failed"

echo "== dlopen(libhpu.so.$major)"
"$cc" -Wall -Wextra -Werror "$here/consumer/dlopen.c" -o "$tmp/dlopen_consumer" -ldl || fail "the dlopen consumer does not build"
if nm -u "$tmp/dlopen_consumer" | grep -q ' hpu'; then fail "the dlopen consumer links libhpu symbols directly"; fi
number=$(echo "$version" | awk -F. '{ print ($1 * 65536) + ($2 * 256) + $3 }')
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/dlopen_consumer" "$major" "$number" || fail "the dlopen consumer failed"

echo "== man"
for page in "3 hpuMemStats" "7 hpu" "3 hpuGetErrorString"; do
  # shellcheck disable=SC2086
  where=$(MANPATH=$prefix/share/man man -w $page) || fail "MANPATH=$prefix/share/man man -w $page finds nothing"
  case $where in "$prefix"/*) ;; *) fail "man -w $page found $where, not the installed page" ;; esac
done
# An alias page renders its target.
MANPATH=$prefix/share/man MANWIDTH=80 man -P cat 3 hpuGetErrorString 2>/dev/null | grep -q hpuGetErrorName ||
  fail "man 3 hpuGetErrorString does not show the hpuGetErrorName page"
echo "consumers: ok"
