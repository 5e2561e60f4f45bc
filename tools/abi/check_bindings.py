#!/usr/bin/env python3
"""Checks the bindings' hand-written code against the C headers: every libhpu
function the Python and Node wrappers name exists (in the library they load it
from), and every call whose arguments can be counted passes one per C
parameter. The generated declarations are checked by gen_bindings.py --check;
this covers what is written by hand around them:

  Python (bindings/python/hpu/*.py, read with ast):
    _lib.hpuX(a, b)               a direct call: one argument per parameter
    _call(_lib.hpuX, a, b, OUT)   ops.py's form: one argument per parameter after the stream
    any other .hpuX or "hpuX"     the function must exist
  Node (bindings/node/lib/*.js, read with a small tokenizer):
    C.hpuX(a, b)                  a direct call
    call('hpuX', a, b, OUT)       ops.js's forms: one argument per parameter after the stream
    callOn(device, 'hpuX', [a, b, OUT])
    any other .hpuX or 'hpuX'     the function must exist

A call with a spread (*args, ...args) is checked for the function's existence
only. With --cc, also compiles a C program that prints each struct's size and
field offsets and compares them with the ctypes layouts of the generated
bindings/python/hpu/_abi.py.

usage: check_bindings.py SOURCE_DIR [--cc CC]
"""
from __future__ import annotations

import argparse
import ast
import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hpuabi  # noqa: E402

FUNCTION_NAME = re.compile(r"^hpu[A-Z][A-Za-z0-9]*$")  # hpuMemAlloc; not a type (hpuMemStats_t)
GENERATED = {"_abi.py", "abi.js"}


class Checker:
    def __init__(self, api: hpuabi.Api):
        self.api = api
        self.problems: List[str] = []
        self.calls = 0

    def name(self, where: str, name: str, library: Optional[str] = None) -> Optional[hpuabi.Function]:
        f = self.api.functions.get(name)
        if f is None or f.library is None:
            self.problems.append(f"{where}: {name} is not a function of include/hpu/*.h and abi/*.txt")
            return None
        if library and f.library != library:
            self.problems.append(f"{where}: {name} is libhpu-{f.library}'s, not lib{library}'s")
        return f

    def arity(self, where: str, name: str, given: Optional[int], after_stream: bool,
              library: Optional[str] = None) -> None:
        f = self.name(where, name, library)
        if f is None or given is None:
            return
        self.calls += 1
        want = len(f.params) - (1 if after_stream else 0)
        if given != want:
            params = ", ".join(p.name for p in f.params[1 if after_stream else 0:])
            what = "after the stream " if after_stream else ""
            self.problems.append(f"{where}: {name} is called with {given} argument(s) {what}but takes {want} "
                                 f"({params}); see include/hpu/{f.header}")


# ---- Python ---------------------------------------------------------------------------------
def check_python(c: Checker, path: Path, rel: str) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    counted = set()

    def count(args) -> Optional[int]:
        return None if any(isinstance(a, ast.Starred) for a in args) else len(args)

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Attribute) and FUNCTION_NAME.match(fn.attr):
            lib = "hpu" if isinstance(fn.value, ast.Name) and fn.value.id == "_lib" else None
            c.arity(f"{rel}:{node.lineno}", fn.attr, count(node.args), False, lib)
            counted.add(id(fn))
        elif isinstance(fn, ast.Name) and fn.id == "_call" and node.args and isinstance(node.args[0], ast.Attribute) \
                and FUNCTION_NAME.match(node.args[0].attr):
            n = count(node.args[1:])
            c.arity(f"{rel}:{node.lineno}", node.args[0].attr, n, True, "hpu")
            counted.add(id(node.args[0]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and FUNCTION_NAME.match(node.attr) and id(node) not in counted:
            c.name(f"{rel}:{node.lineno}", node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and FUNCTION_NAME.match(node.value):
            c.name(f"{rel}:{node.lineno}", node.value)


# ---- JavaScript -----------------------------------------------------------------------------
CLOSE = {"(": ")", "[": "]", "{": "}"}


def js_code(text: str) -> Tuple[str, List[Tuple[int, str]]]:
    """The source with comments blanked (same length, so offsets stay), and its string
    literals as (offset, text)."""
    out, strings, i, n = list(text), [], 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2) + 2
            out[i:j] = [x if x == "\n" else " " for x in text[i:j]]
            i = j
        elif ch in "'\"`":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            strings.append((i, text[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return "".join(out), strings


def js_args(code: str, start: int) -> Tuple[List[str], int]:
    """The top-level arguments of the bracket at code[start] and the offset after its close."""
    depth, i, args, begin = 0, start, [], start + 1
    while i < len(code):
        ch = code[i]
        if ch in "'\"`":
            j = i + 1
            while j < len(code) and code[j] != ch:
                j += 2 if code[j] == "\\" else 1
            i = j
        elif ch in CLOSE:
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                last = code[begin:i].strip()
                if last or args:
                    args.append(last)
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(code[begin:i].strip())
            begin = i + 1
        i += 1
    return args, i


def spread(args: List[str]) -> bool:
    return any(a.startswith("...") for a in args)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_js(c: Checker, path: Path, rel: str) -> None:
    text = path.read_text(encoding="utf-8")
    code, strings = js_code(text)
    counted = set()
    for m in re.finditer(r"\bC\.(hpu\w+)\s*\(", code):
        args, _ = js_args(code, m.end() - 1)
        c.arity(f"{rel}:{line_of(text, m.start())}", m.group(1), None if spread(args) else len(args), False, "hpu")
        counted.add(m.start(1))
    for m in re.finditer(r"\b(call|callOn)\s*\(", code):
        args, _ = js_args(code, m.end() - 1)
        at = 1 if m.group(1) == "callOn" else 0
        if len(args) <= at or not re.fullmatch(r"'hpu\w+'", args[at]):
            continue  # a name built at run time: ops.js checks it against abi.FUNCTIONS when called
        name, rest = args[at][1:-1], args[at + 1:]
        if m.group(1) == "callOn":
            inner = rest[0] if rest else ""
            rest = js_args(inner, 0)[0] if inner.startswith("[") else None
        c.arity(f"{rel}:{line_of(text, m.start())}", name,
                None if rest is None or spread(rest) else len(rest), True, "hpu")
        counted.add(m.start() + code[m.start():].index(args[at]) + 1)
    for m in re.finditer(r"\.(hpu[A-Z]\w*)\b", code):
        if m.start(1) not in counted and FUNCTION_NAME.match(m.group(1)):
            c.name(f"{rel}:{line_of(text, m.start())}", m.group(1))
    for offset, s in strings:
        if FUNCTION_NAME.match(s) and offset + 1 not in counted:
            c.name(f"{rel}:{line_of(text, offset)}", s)


# ---- struct layouts -------------------------------------------------------------------------
def check_layouts(c: Checker, src: Path, cc: str) -> int:
    spec = importlib.util.spec_from_file_location("hpu_abi_generated", src / "bindings/python/hpu/_abi.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f"#include <hpu/{h}>" for h in c.api.headers]
    lines.append("int main(void) {")
    for s in c.api.structs.values():
        lines.append(f'  printf("{s.name} %zu\\n", sizeof({s.name}));')
        for f in s.fields:
            lines.append(f'  printf("{s.name}.{f.name} %zu\\n", offsetof({s.name}, {f.name}));')
    lines += ["  return 0;", "}"]
    with tempfile.TemporaryDirectory(prefix="hpu-layouts-") as tmp:
        prog, exe = os.path.join(tmp, "layouts.c"), os.path.join(tmp, "layouts")
        Path(prog).write_text("\n".join(lines) + "\n")
        inc = ["-I", str(src / "include"), "-I", tmp]
        Path(tmp, "hpu").mkdir()
        Path(tmp, "hpu", "version.h").write_text("/* not needed for layouts */\n")
        r = subprocess.run([cc, "-std=c99", *inc, prog, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            c.problems.append(f"the struct layout program does not compile:\n{r.stderr.strip()}")
            return 0
        want = dict(line.rsplit(" ", 1) for line in subprocess.run([exe], capture_output=True, text=True,
                                                                    check=True).stdout.splitlines())
    for s in c.api.structs.values():
        cls = getattr(gen, s.name, None)
        if cls is None:
            c.problems.append(f"bindings/python/hpu/_abi.py has no struct {s.name}")
            continue
        got = {s.name: ctypes.sizeof(cls)}
        got.update({f"{s.name}.{name}": getattr(cls, name).offset for name, _ in cls._fields_})
        for key, value in want.items():
            if key.split(".")[0] == s.name and got.get(key) != int(value):
                c.problems.append(f"{key}: the C compiler says {value}, ctypes (_abi.py) {got.get(key)}")
    return len(c.api.structs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source")
    ap.add_argument("--cc", help="C compiler for the struct layout check")
    args = ap.parse_args()
    src = Path(args.source)
    c = Checker(hpuabi.parse(src))
    files = 0
    for path in sorted((src / "bindings/python/hpu").glob("*.py")):
        if path.name not in GENERATED:
            check_python(c, path, str(path.relative_to(src)))
            files += 1
    for path in sorted((src / "bindings/node/lib").glob("*.js")):
        if path.name not in GENERATED:
            check_js(c, path, str(path.relative_to(src)))
            files += 1
    structs = check_layouts(c, src, args.cc) if args.cc else 0
    for p in c.problems:
        print(f"FAIL: {p}", file=sys.stderr)
    if c.problems:
        print(f"bindings against the headers: {len(c.problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"bindings against the headers: ok ({files} files, {c.calls} calls counted"
          f"{f', {structs} struct layouts' if args.cc else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
