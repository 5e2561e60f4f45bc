#!/bin/sh
# Run by check_packages.sh inside the clean root, as root: installs the
# packages in /debs with apt-get and uses them as a user would.
set -eu
fail() { echo "FAIL (in the clean root): $*" >&2; exit 1; }
for v in $(env | sed -n 's/^\(HPU_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_LIBRARY_PATH PYTHONPATH NODE_PATH
export DEBIAN_FRONTEND=noninteractive
dpkg -s libhpu0 >/dev/null 2>&1 && fail "libhpu0 is installed already"
apt-get install -y -q --no-install-recommends /debs/*.deb >/check/apt.log 2>&1 || { cat /check/apt.log; fail "apt-get install"; }
cd /check

cc app.c -o app $(pkg-config --cflags --libs hpu) || fail "a C program does not build with pkg-config"
./app || fail "the C program failed"
ldd ./app | grep -Eq "libhpu.so.0 => (/usr)?/lib/.*/libhpu.so.0" || fail "the C program does not load the installed libhpu.so.0: $(ldd ./app)"
hpu-smi >/check/smi.txt 2>&1 || { cat /check/smi.txt; fail "hpu-smi"; }
hpu-train --help >/check/train.txt 2>&1 || { cat /check/train.txt; fail "hpu-train --help"; }
grep -q max-epochs /check/train.txt || fail "hpu-train --help lists no --max-epochs"
man -w 3 hpuMemStats >/dev/null || fail "man -w 3 hpuMemStats"

/usr/bin/python3 -c '
import hpu
assert hpu.library_path().startswith("/usr/lib/"), hpu.library_path()
print("python3-hpu:", hpu.device_count(), "devices")' || fail "import hpu"

mkdir project && cd project
echo '{"name": "app", "version": "1.0.0", "private": true}' >package.json
npm install --install-links --no-audit --no-fund --loglevel=error /usr/share/nodejs/hpu >/check/npm.log 2>&1 ||
  { cat /check/npm.log; fail "npm install --install-links /usr/share/nodejs/hpu"; }
node -e '
const hpu = require("hpu");
const path = require("hpu/lib/native").libraryPath;
if (!path.startsWith("/usr/lib/")) throw new Error(`loaded ${path}`);
console.log("node-hpu:", hpu.deviceCount(), "devices");' || fail "require('hpu')"
