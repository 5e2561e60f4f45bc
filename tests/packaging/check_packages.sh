#!/bin/sh
# Checks the Debian packages scripts/package built: the five packages and the
# dependencies each declares, lintian (no errors), then installs them with
# apt-get into a clean root and runs what a user would there: a C program
# built with pkg-config, hpu-smi, hpu-train --help, import hpu, and the Node
# package added to a project with npm.
#
# The clean root is an overlay of this system in a private mount namespace:
# apt-get installs the packages into the overlay's upper layer, so the system
# itself is left as it was; the packages' files, maintainer scripts and
# ldconfig trigger run as on a real machine. (That the dependencies are
# complete is checked on the Depends fields, which dpkg-shlibdeps derives from
# what the binaries link.) Needs root.
#   usage: check_packages.sh <folder of .deb files> <source dir>
set -eu
dist=$(realpath "$1") src=$(realpath "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (a mount namespace and a chroot)"

echo "== the packages and their dependencies"
deb() { ls "$dist"/"$1"_*.deb 2>/dev/null | head -n 1; }
for p in libhpu0 libhpu-dev hpu-tools python3-hpu node-hpu; do
  [ -n "$(deb $p)" ] || fail "no $p package in $dist"
done
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
version=$(sed -n 's/^project(hpu VERSION \([0-9.]*\) .*/\1/p' "$src/CMakeLists.txt")
[ "$(field libhpu0 Version)" = "$version" ] ||
  fail "the packages are version $(field libhpu0 Version), the project $version (debian/changelog's first line)"
contents() { dpkg-deb -c "$(deb "$1")" | awk '{ print $6, $7, $8 }'; }
for want in libuv1 libopenblas0 libjansson4; do
  field libhpu0 Depends | grep -q "$want" || fail "libhpu0 does not depend on $want: $(field libhpu0 Depends)"
done
field libhpu0 Recommends | grep -q libibverbs1 || fail "libhpu0 does not recommend libibverbs1"
field libhpu0 Depends | grep -q libibverbs && fail "libhpu0 depends on libibverbs (it loads it at run time)"
field libhpu-dev Depends | grep -q "libhpu0 (= " || fail "libhpu-dev does not depend on its libhpu0"
field python3-hpu Depends | grep -q python3 || fail "python3-hpu does not depend on python3"
field node-hpu Depends | grep -q nodejs || fail "node-hpu does not depend on nodejs"
contents libhpu0 | grep "libhpu.so.0 ->" >/dev/null || fail "libhpu0 holds no libhpu.so.0 (the SONAME link)"
contents libhpu-dev | grep "pkgconfig/hpu-trainer.pc" >/dev/null || fail "libhpu-dev holds no hpu-trainer.pc"
for f in hpu-train hpu-smi; do
  contents hpu-tools | grep "usr/bin/$f " >/dev/null || fail "hpu-tools holds no $f"
done

echo "== lintian"
lintian --fail-on error "$dist"/*.deb || fail "lintian reports errors"

echo "== apt-get install ./*.deb into a clean root"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpu-packages.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/upper" "$tmp/work" "$tmp/root"
unshare -m sh -eu -c '
  tmp=$1 dist=$2 src=$3
  mount -t overlay overlay -o "lowerdir=/,upperdir=$tmp/upper,workdir=$tmp/work" "$tmp/root"
  for d in proc dev dev/shm dev/pts sys; do mount --rbind "/$d" "$tmp/root/$d"; done
  mkdir -p "$tmp/root/debs" "$tmp/root/check"
  cp "$dist"/*.deb "$tmp/root/debs/"
  rm -f "$tmp/root/debs/"*dbgsym*
  cp "$src/tests/abi/consumer/pkgconfig.c" "$tmp/root/check/app.c"
  cp "$src/tests/packaging/in_root.sh" "$tmp/root/check/"
  chroot "$tmp/root" sh /check/in_root.sh
' sh "$tmp" "$dist" "$src" || fail "the packages do not work in a clean root"
dpkg -s libhpu0 >/dev/null 2>&1 && fail "the system itself got libhpu0 installed"
echo "packages: ok"
