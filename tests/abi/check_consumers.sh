#!/bin/sh
# Installs the build into a temporary prefix, then, with no LD_LIBRARY_PATH
# and no HPU_LIBRARY, runs what the README promises of an installed tree: the
# installed programs (their RUNPATH finds libhpu; hpu-bench finds its
# installed helpers), a C program via pkg-config linked with the README's
# rpath, C++ programs of hpu::hpu and hpu::trainer via find_package(hpu), a
# program that only dlopen()s libhpu.so.<major>, the Python package from the
# prefix's site directory, the Node package installed with npm from the
# prefix; and checks that man finds the installed pages.
#   usage: check_consumers.sh <build dir> <tests/abi dir> <cc> <c++> <version> <major>
set -eu
build=$1 here=$2 cc=$3 cxx=$4 version=$5 major=$6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpu-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
# The consumers run with the default configuration, whatever the caller's,
# and find libhpu by themselves.
for v in $(env | sed -n 's/^\(HPU_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_LIBRARY_PATH PYTHONPATH NODE_PATH

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$prefix" -name hpu.pc)
[ -n "$pc" ] || fail "no hpu.pc under $prefix"
lib=$(find "$prefix" -name "libhpu.so.$major" -not -path "*/bench-noprof/*" | head -n 1)
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
"$cc" -Wall -Wextra -Werror "$here/consumer/pkgconfig.c" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs hpu) \
  -Wl,-rpath,"$(pkg-config --variable=libdir hpu)" || fail "the pkg-config consumer does not build"
"$tmp/pc_consumer" || fail "the pkg-config consumer failed"
got=$(pkg-config --modversion hpu-trainer) || fail "no hpu-trainer.pc beside hpu.pc"
[ "$got" = "$version" ] || fail "pkg-config --modversion hpu-trainer is $got, expected $version"
pkg-config --libs hpu-trainer | grep -q -- "-lhpu-trainer" || fail "hpu-trainer.pc does not link -lhpu-trainer"

echo "== installed programs find their libraries"
for lib_of in "bin/hpu-train libhpu-trainer.so.$major" "bin/hpu-train libhpu.so.$major" "bin/hpu-demo libhpu.so.$major"; do
  set -- $lib_of
  where=$(ldd "$prefix/$1" | sed -n "s|^\s*$2 => \(\S*\).*|\1|p")
  [ "$(realpath "$where" 2>/dev/null)" = "$(realpath "$libdir/$2")" ] || fail "$1 loads $2 from '$where', not $libdir"
done
"$prefix/bin/hpu-train" --help >"$tmp/train-help.txt" || fail "the installed hpu-train --help failed"
grep -q "max-epochs" "$tmp/train-help.txt" || fail "the installed hpu-train --help lists no --max-epochs"
"$prefix/bin/hpu-smi" >"$tmp/smi.txt" 2>&1 || { cat "$tmp/smi.txt"; fail "the installed hpu-smi failed"; }
# hpu-bench train --profile finds the installed copy of libhpu without the
# profiler's hooks relative to itself, not the build tree's.
if [ -x "$prefix/bin/hpu-bench" ]; then
  noprof=$(realpath "$libdir/hpu/bench-noprof")
  "$prefix/bin/hpu-bench" train --profile --rounds 1 --steps 2 --precision 32-true --devices 1 \
    >"$tmp/bench.txt" 2>&1 || true  # its status counts the limits missed, noise in 2 steps
  grep -q "compiled out ($noprof)" "$tmp/bench.txt" ||
    { cat "$tmp/bench.txt"; fail "the installed hpu-bench train --profile does not use $noprof"; }
  # hpu-bench allreduce-proc runs the peers installed in <libdir>/hpu (the
  # header names each peer's program, whether it ran or failed), for those
  # this build made.
  "$prefix/bin/hpu-bench" allreduce-proc -np 2 -b 4 -e 4 -n 1 -w 0 --no-bind >"$tmp/proc.txt" 2>&1 ||
    { cat "$tmp/proc.txt"; fail "the installed hpu-bench allreduce-proc failed"; }
  for peer in mpi gloo; do
    if [ ! -x "$build/hpu-bench-$peer" ]; then
      echo "(hpu-bench-$peer is not built here: its installed lookup is not checked)"
      continue
    fi
    [ -x "$libdir/hpu/hpu-bench-$peer" ] || fail "hpu-bench-$peer is built but not installed in $libdir/hpu"
    installed=$(realpath "$libdir/hpu/hpu-bench-$peer")
    grep "^# peer $peer: " "$tmp/proc.txt" | grep -qF "($installed)" ||
      { cat "$tmp/proc.txt"; fail "the installed hpu-bench allreduce-proc does not run $installed"; }
  done
fi

echo "== find_package(hpu)"
cmake -S "$here/consumer/cmake" -B "$tmp/cmake" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DHPU_PREFIX="$prefix" -DHPU_EXPECTED_VERSION="$version" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "the find_package consumer does not configure"; }
cmake --build "$tmp/cmake" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; fail "the find_package consumer does not build"; }
"$tmp/cmake/consumer" || fail "the find_package consumer failed"
"$tmp/cmake/trainer_consumer" "$prefix/share/hpu/examples/fashion_mnist.json" || fail "the hpu::trainer consumer failed"

echo "== dlopen(libhpu.so.$major)"
"$cc" -Wall -Wextra -Werror "$here/consumer/dlopen.c" -o "$tmp/dlopen_consumer" -ldl || fail "the dlopen consumer does not build"
if nm -u "$tmp/dlopen_consumer" | grep -q ' hpu'; then fail "the dlopen consumer links libhpu symbols directly"; fi
number=$(echo "$version" | awk -F. '{ print ($1 * 65536) + ($2 * 256) + $3 }')
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/dlopen_consumer" "$major" "$number" || fail "the dlopen consumer failed"

echo "== Python: import hpu from the prefix"
site=$(find "$prefix" -path '*-packages/hpu/__init__.py' | head -n 1)
[ -n "$site" ] || fail "no Python package under $prefix"
site=$(dirname "$(dirname "$site")")
got=$(cd "$tmp" && PYTHONPATH=$site PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \
  'import hpu; print(hpu.library_path()); print(hpu.device_count())') || fail "import hpu from $site failed"
[ "$(realpath "$(echo "$got" | head -n 1)")" = "$(realpath "$libdir/libhpu.so.$major")" ] ||
  fail "the installed Python package loaded $(echo "$got" | head -n 1), not $libdir/libhpu.so.$major"

echo "== Node: npm install --install-links from the prefix"
node_pkg=$prefix/share/nodejs/hpu
[ -f "$node_pkg/package.json" ] || fail "no Node package at $node_pkg"
mkdir "$tmp/node-project"
(cd "$tmp/node-project" && echo '{"name": "consumer", "version": "1.0.0", "private": true}' >package.json &&
  npm install --install-links --no-audit --no-fund --loglevel=error "$node_pkg" >"$tmp/npm.log" 2>&1) ||
  { cat "$tmp/npm.log"; fail "npm install $node_pkg failed"; }
got=$(cd "$tmp/node-project" && node -e \
  "const hpu = require('hpu'); console.log(require('hpu/lib/native').libraryPath); console.log(hpu.deviceCount());") ||
  fail "require('hpu') after npm install $node_pkg failed"
[ "$(realpath "$(echo "$got" | head -n 1)")" = "$(realpath "$libdir/libhpu.so.$major")" ] ||
  fail "the installed Node package loaded $(echo "$got" | head -n 1), not $libdir/libhpu.so.$major"

echo "== man"
for program in "$prefix"/bin/hpu-*; do
  name=$(basename "$program")
  MANPATH=$prefix/share/man man -w 1 "$name" >/dev/null 2>&1 || fail "the installed program $name has no page"
done
for page in "3 hpuMemStats" "7 hpu" "3 hpuGetErrorString"; do
  # shellcheck disable=SC2086
  where=$(MANPATH=$prefix/share/man man -w $page) || fail "MANPATH=$prefix/share/man man -w $page finds nothing"
  case $where in "$prefix"/*) ;; *) fail "man -w $page found $where, not the installed page" ;; esac
done
# An alias page renders its target.
MANPATH=$prefix/share/man MANWIDTH=80 man -P cat 3 hpuGetErrorString 2>/dev/null | grep -q hpuGetErrorName ||
  fail "man 3 hpuGetErrorString does not show the hpuGetErrorName page"
# Alias pages are installed as symbolic links, not .so pages.
[ -L "$prefix/share/man/man3/hpuGetErrorString.3" ] || fail "the alias page hpuGetErrorString.3 is not a symbolic link"
so=$(grep -rl '^\.so ' "$prefix/share/man" || true)
[ -z "$so" ] || fail "installed pages that are .so aliases: $so"
# man -k finds the pages once mandb has indexed them (README).
mandb -q "$prefix/share/man" || fail "mandb $prefix/share/man failed"
for name in hpuGetErrorString hpu-demo; do
  MANPATH=$prefix/share/man man -k "$name" 2>/dev/null | grep -q "^$name (" ||
    fail "man -k $name finds nothing after mandb $prefix/share/man"
done
echo "consumers: ok"
