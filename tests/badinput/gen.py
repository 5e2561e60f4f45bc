#!/usr/bin/env python3
"""Generates the table-driven bad-input test from the public headers and the
golden export lists (abi/symbols.txt, abi/trainer-symbols.txt): every exported function that returns
hpuStatus_t is called once per parameter with that parameter made bad (NULL,
a closed handle, a handle of another kind, an out-of-range enum, a huge or
negative number) and every other parameter plausible. A new exported
function is covered the moment it is in the list.

usage: gen.py SOURCE_DIR OUTPUT.cpp
"""
import fnmatch
import re
import sys
from pathlib import Path

HANDLES = {"hpuDevice_t": "device", "hpuStream_t": "stream", "hpuEvent_t": "event",
           "hpuTensor_t": "tensor", "hpuComm_t": "comm"}
ENUMS = {"hpuDataType_t": "HPU_FLOAT32", "hpuRedOp_t": "(hpuRedOp_t)0", "hpuMemcpyKind_t": "HPU_MEMCPY_HOST_TO_DEVICE",
         "hpuLogLevel_t": "HPU_LOG_WARN", "hpuAutocastList_t": "(hpuAutocastList_t)0",
         "hpuReduction_t": "(hpuReduction_t)0", "hpuStatus_t": "HPU_SUCCESS"}
INTS = {"int", "int32_t", "int64_t", "long", "unsigned", "uint32_t", "uint64_t", "size_t", "float", "double"}


def parse(src: Path):
    exported = []
    for ledger in ("abi/symbols.txt", "abi/trainer-symbols.txt"):
        for line in (src / ledger).read_text().splitlines():
            m = re.match(r"^(hpu\w+)\s", line)
            if m:
                exported.append(m.group(1))
    text = ""
    for h in sorted((src / "include/hpu").glob("*.h")):
        text += re.sub(r"/\*.*?\*/", " ", h.read_text(), flags=re.S) + "\n"
    protos = {}
    for m in re.finditer(r"HPU_API\s+([\w\s\*]+?)\s*\b(hpu\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        plist = []
        if params and params != "void":
            for p in params.split(","):
                p = " ".join(p.split())
                pm = re.match(r"^(.*?)(\w+)$", p)
                ptype, pname = pm.group(1).strip(), pm.group(2)
                plist.append((ptype, pname))
        protos[name] = (ret, plist)
    return exported, protos


def kind_of(ptype):
    base = ptype.replace("const", "").strip()
    if "*" in base:
        return "pointer", base
    if base in HANDLES:
        return "handle", base
    if base in ENUMS:
        return "enum", base
    if base == "hpuLogCallback_t":
        return "callback", base
    if base in INTS:
        return "number", base
    return "other", base


def plausible(ptype):
    kind, base = kind_of(ptype)
    if kind == "pointer":
        return f"({ptype})scratch()"
    if kind == "handle":
        return f"fx.{HANDLES[base]}"
    if kind == "enum":
        return ENUMS[base]
    if kind == "callback":
        return "quiet_log"
    if base in ("float", "double"):
        return "1.0"
    return "1"


def bad_values(ptype):
    """(expression, description, strict): strict means the call must fail."""
    kind, base = kind_of(ptype)
    if kind == "pointer":
        return [("NULL", "NULL", True)]
    if kind == "handle":
        h = HANDLES[base]
        other = "stream" if h != "stream" else "event"
        # A NULL stream means the default stream of the device involved (hpu(7)).
        return [("NULL", "NULL", h != "stream"), (f"fx.stale_{h}", "a closed handle", True),
                (f"({base})fx.{other}", "a handle of another kind", True)]
    if kind == "enum":
        return [(f"({base})9999", "9999", True)]
    if kind == "callback":
        return [("NULL", "NULL", False)]
    if base in ("float", "double"):
        return [("NAN", "NaN", False), ("-1e300", "-1e300", False)]
    if base.startswith("u") or base == "size_t":
        return [("(" + base + ")-1", "the largest value", False)]
    return [("-1", "-1", False), ("(" + base + ")0x7fffffff", "INT_MAX", False)]


def main():
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    exported, protos = parse(src)
    allow = []
    for line in (src / "tests/badinput/accepted.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            allow.append(tuple(line.split()[:2]))
    body = []
    missing = [f for f in exported if f not in protos]
    if missing:
        sys.exit("gen.py: exported but not declared in include/hpu: " + ", ".join(missing))
    for fn in exported:
        ret, params = protos[fn]
        if ret != "hpuStatus_t" or not params:
            continue
        cases = []
        if len(params) > 1:
            # With every argument plausible: a bad argument's call that fails the
            # same way as this one failed on another argument first.
            args = [plausible(t) for t, _ in params]
            cases.append(f"  fx.baseline({fn}({', '.join(args)}));")
        for i, (ptype, pname) in enumerate(params):
            for expr, desc, strict in bad_values(ptype):
                args = [expr if j == i else plausible(t) for j, (t, _) in enumerate(params)]
                accepted = desc == "NULL" and any(
                    fnmatch.fnmatchcase(fn, f) and fnmatch.fnmatchcase(pname, p) for f, p in allow)
                cases.append(f'  check(fx, "{fn}", "{pname}", "{desc}", {"true" if strict and not accepted else "false"},\n'
                             f'        {fn}({", ".join(args)}));')
        body.append(f"TEST(BadInput, {fn}) {{\n  Fixture fx;\n" + "\n".join(cases) + "\n}\n")
    out.write_text('// Generated by tests/badinput/gen.py from include/hpu/*.h and abi/*.txt. Do not edit.\n'
                   '#include "bad_input.hpp"\n\n' + "\n".join(body))


main()
