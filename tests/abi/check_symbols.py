"""A library exports exactly the symbols of its ledger, each under the version
node of the version that added it; the ledger is well formed (each name once,
versions not decreasing and not beyond the project's); the soname is
<stem>.so.<major>.

libhpu: every exported symbol is in abi/symbols.txt (nodes HPU_<v>).
libhpu-trainer (--c-only): every exported C symbol is in
abi/trainer-symbols.txt (nodes HPU_TRAINER_<v>); its C++ API is not ledgered.

usage: check_symbols.py <lib.so> <ledger> <project version> [<soname stem> <node prefix> [--c-only]]"""
import collections
import re
import subprocess
import sys

from abilib import Failures, read_ledger


def main(lib, ledger_path, project_version, stem="libhpu", prefix="HPU", *flags):
    c_only = "--c-only" in flags
    f = Failures("exported symbols")
    major, minor = (int(x) for x in project_version.split(".")[:2])
    ledger = read_ledger(ledger_path, f)
    counts = collections.Counter(name for name, _ in ledger)
    for name, n in sorted(counts.items()):
        if n > 1:
            f.add(f"{ledger_path}: {name} is listed {n} times")
    versions = [tuple(map(int, v.split("."))) for _, v in ledger]
    if versions != sorted(versions):
        f.add(f"{ledger_path}: versions must not decrease down the file (append new symbols at the end)")
    for name, v in ledger:
        if tuple(map(int, v.split("."))) > (major, minor):
            f.add(f"{ledger_path}: {name} {v} is newer than the project version {project_version}")
    expected = {name: v for name, v in ledger}

    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, sym = parts[-2], parts[-1]
        if kind == "A":  # version nodes (HPU_0_1)
            continue
        name, _, node = sym.partition("@")
        if c_only and name.startswith("_Z"):
            continue
        exported[name] = node.lstrip("@")
    for name in sorted(set(exported) - set(expected)):
        f.add(f"{lib} exports {name}, which {ledger_path} does not list")
    for name in sorted(set(expected) - set(exported)):
        f.add(f"{ledger_path} lists {name}, which {lib} does not export "
              "(missing HPU_API or definition?)")
    for name in sorted(set(expected) & set(exported)):
        node = prefix + "_" + expected[name].replace(".", "_")
        if exported[name] != node:
            f.add(f"{name} is exported under version node {exported[name] or '(none)'}, expected {node}")

    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    soname = m.group(1) if m else None
    if soname != f"{stem}.so.{major}":
        f.add(f"soname is {soname}, expected {stem}.so.{major}")
    f.finish(f"{len(exported)} symbols, soname {soname}")


if __name__ == "__main__":
    main(*sys.argv[1:])
