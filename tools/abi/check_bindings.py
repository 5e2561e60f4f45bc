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

A call whose arguments are counted is also checked argument by argument, so
that a reorder keeping the count (hpuTensorFill(tensor, value, stream) for
(stream, tensor, value)) is caught. An argument the checker can classify must
sit at a parameter of its kind:

  a stream       stream_for(..), self._stream(), streamFor(..), stream.handle   hpuStream_t
  self's handle  self._handle in class Tensor, this.handle in class Event       hpuTensor_t, hpuEvent_t
  a device       device.handle, resolve(..).handle                              hpuDevice_t
  another handle x.handle, x._handle                                            a handle
  options        opts, options, ctypes.byref(opts), adamwOptions(..)            const hpu*Options_t *
  an out-pointer ctypes.byref(x)                                                a pointer
  an op's output OUT, NO_OUT, _out(..), out(..)                                 hpuTensor_t *
  device memory  t.data_ptr(), t.dataPtr()                                      void *
  a data type    x.dtype.value, DTYPES[..].value, dtypeInfo(..).value           hpuDataType_t
  a float        1.0, float(..)                                                 double, float
  a string       "..", s.encode(..), String(..)                                 const char *

Some parameters also demand an argument of their kind (or NULL): the stream
of a queued function (one with parameters besides the stream) a stream, an
options struct options, and, in the ops' _call/call forms, an op's output OUT
or NO_OUT. Where the types do not tell, names do: an argument named like
another parameter of the same type (src, or src.handle) must be at that
parameter, so _call(_lib.hpuAddInplace, src, dst, alpha) is wrong for
hpuAddInplace(stream, dst, src, alpha). Other arguments are not classified.

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

    def arity(self, where: str, name: str, args: Optional[List[Tuple[str, Optional[str], Optional[str]]]],
              after_stream: bool, library: Optional[str] = None) -> None:
        """Checks a call of `name` with `args`, each (source text, kind, name): its kind
        (KINDS; None: not classified) and the variable it names (None: none), or
        args None when they cannot be counted."""
        f = self.name(where, name, library)
        if f is None or args is None:
            return
        self.calls += 1
        params = f.params[1 if after_stream else 0:]
        if len(args) != len(params):
            names = ", ".join(p.name for p in params)
            what = "after the stream " if after_stream else ""
            self.problems.append(f"{where}: {name} is called with {len(args)} argument(s) {what}but takes "
                                 f"{len(params)} ({names}); see include/hpu/{f.header}")
            return
        types = {p.name: (p.base, p.pointers) for p in params}
        for (text, kind, var), p in zip(args, params):
            at = f"{where}: {name}'s {p.ctype.rstrip()} {p.name} is given {text}"
            wanted = self.demand(p, len(f.params), after_stream)
            if kind is not None and not self.fits(kind, p):
                self.problems.append(f"{at}, {describe(kind)}; see include/hpu/{f.header}")
            elif wanted is not None and kind not in (wanted, "null"):
                self.problems.append(f"{at}, not {describe(wanted)}; see include/hpu/{f.header}")
            elif var is not None and var != p.name and types.get(var) == (p.base, p.pointers):
                self.problems.append(f"{at}, which names its parameter {var}; see include/hpu/{f.header}")

    def demand(self, p: hpuabi.Param, nparams: int, after_stream: bool) -> Optional[str]:
        """The kind of argument parameter p must be given (None: any; NULL always may be)."""
        if p.ctype == "hpuStream_t" and nparams > 1:
            return "hpuStream_t"
        if self.fits("options", p):
            return "options"
        if after_stream and p.ctype == "hpuTensor_t *":
            return "output"
        return None

    def fits(self, kind: str, p: hpuabi.Param) -> bool:
        """Whether an argument of `kind` may be passed for parameter p."""
        what = self.api.kind_of(p.ctype)
        if kind.startswith("hpu"):  # a handle of a known type
            return p.ctype == kind
        return {"null": what == "handle" or p.pointers >= 1,
                "handle": what == "handle" and p.pointers == 0,
                "options": bool(OPTIONS_TYPE.match(p.base)) and p.pointers == 1 and p.is_const,
                "pointer": p.pointers >= 1,
                "output": p.ctype == "hpuTensor_t *",
                "memory": what == "void" and p.pointers == 1,
                "dtype": p.ctype == "hpuDataType_t",
                "float": p.ctype in ("double", "float"),
                "string": p.ctype == "const char *"}[kind]


KINDS = {"null": "NULL", "handle": "a handle", "options": "an options struct", "pointer": "a pointer to a result",
         "output": "an op's output", "memory": "device memory", "dtype": "a data type", "float": "a float",
         "string": "a string"}


def describe(kind: str) -> str:
    return f"an {kind}" if kind.startswith("hpu") else KINDS[kind]


def handle_of_class(api: hpuabi.Api, cls: Optional[str]) -> str:
    """The handle type of a wrapper class's own handle (Tensor: hpuTensor_t), else "handle"."""
    return f"hpu{cls}_t" if cls and f"hpu{cls}_t" in api.handles else "handle"


OPTIONS_NAME = re.compile(r"^_?\w*opt(ion)?s$", re.I)  # opts, options, _adamw_options
OPTIONS_TYPE = re.compile(r"^hpu\w*Options_t$")  # hpuSgdOptions_t: the structs called options
DEVICE_NAME = re.compile(r"^(dev|device)$")


# ---- Python ---------------------------------------------------------------------------------
class Source:
    """A Python file's lines as UTF-8 (the unit of ast's column offsets), split once:
    ast.get_source_segment splits the whole file again on every call."""

    def __init__(self, text: str):
        self.lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]

    def segment(self, node: ast.AST) -> Optional[str]:
        """The text of node, as ast.get_source_segment gives it."""
        if getattr(node, "end_lineno", None) is None or getattr(node, "end_col_offset", None) is None:
            return None
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return self.lines[first][node.col_offset:node.end_col_offset].decode("utf-8")
        parts = [self.lines[first][node.col_offset:], *self.lines[first + 1:last],
                 self.lines[last][:node.end_col_offset]]
        return b"".join(parts).decode("utf-8")


def py_argument(api: hpuabi.Api, source: Source, node: ast.expr, cls: Optional[str]) -> Tuple[str, Optional[str],
                                                                                              Optional[str]]:
    """(source text, kind, the variable it names) of a Python argument; see the module's doc."""
    text = source.segment(node) or ast.dump(node)
    var = node.id if isinstance(node, ast.Name) else None
    kind = None
    func = node.func if isinstance(node, ast.Call) else None
    fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if isinstance(node, ast.Attribute) and node.attr in ("handle", "_handle"):
        base = node.value
        btext = source.segment(base) or ""
        if isinstance(base, ast.Name):
            var = base.id
        if isinstance(base, ast.Name) and base.id == "self":
            kind = handle_of_class(api, cls)
        elif "stream" in btext.lower():
            kind = "hpuStream_t"
        elif (isinstance(base, ast.Attribute) and DEVICE_NAME.match(base.attr)) or \
                (isinstance(base, ast.Name) and DEVICE_NAME.match(base.id)) or \
                (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "resolve"):
            kind = "hpuDevice_t"
        else:
            kind = "handle"
    elif fname in ("stream_for", "_stream"):
        kind = "hpuStream_t"
    elif isinstance(node, ast.Constant) and node.value is None:
        kind = "null"
    elif isinstance(node, ast.Name) and node.id in ("OUT", "NO_OUT") or fname == "_out":
        kind = "output"
    elif fname == "byref":
        inner = node.args[0] if node.args else None
        kind = "options" if isinstance(inner, ast.Name) and OPTIONS_NAME.match(inner.id) else "pointer"
    elif isinstance(node, ast.Name) and OPTIONS_NAME.match(node.id) or fname and OPTIONS_NAME.match(fname):
        kind = "options"
    elif fname == "data_ptr":
        kind = "memory"
    elif isinstance(node, ast.Attribute) and node.attr == "value" and "dtype" in (source.segment(node.value)
                                                                                   or "").lower():
        kind = "dtype"
    elif isinstance(node, ast.Constant) and isinstance(node.value, float) or fname == "float":
        kind = "float"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) or fname == "encode":
        kind = "string"
    return text, kind, var


def check_python(c: Checker, path: Path, rel: str) -> None:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    source = Source(text)
    counted = set()
    classes = {}  # id(node) -> the innermost class it is in
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for node in ast.walk(cls):
                classes[id(node)] = cls.name

    def described(call: ast.Call, args: List[ast.expr]) -> Optional[list]:
        if any(isinstance(a, ast.Starred) for a in args):
            return None
        return [py_argument(c.api, source, a, classes.get(id(call))) for a in args]

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Attribute) and FUNCTION_NAME.match(fn.attr):
            lib = "hpu" if isinstance(fn.value, ast.Name) and fn.value.id == "_lib" else None
            c.arity(f"{rel}:{node.lineno}", fn.attr, described(node, node.args), False, lib)
            counted.add(id(fn))
        elif isinstance(fn, ast.Name) and fn.id == "_call" and node.args and isinstance(node.args[0], ast.Attribute) \
                and FUNCTION_NAME.match(node.args[0].attr):
            c.arity(f"{rel}:{node.lineno}", node.args[0].attr, described(node, node.args[1:]), True, "hpu")
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


JS_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")


def js_argument(api: hpuabi.Api, text: str, cls: Optional[str]) -> Tuple[str, Optional[str], Optional[str]]:
    """(source text, kind, the variable it names) of a JavaScript argument; see the module's doc."""
    m = re.fullmatch(r"(.*)\.handle", text, re.S)
    var = text if JS_IDENTIFIER.match(text) else m.group(1) if m and JS_IDENTIFIER.match(m.group(1)) else None
    kind = None
    if m:
        base = m.group(1)
        if base == "this":
            kind = handle_of_class(api, cls)
        elif "stream" in base.lower():
            kind = "hpuStream_t"
        elif DEVICE_NAME.match(base.split(".")[-1]) or base.startswith("resolve("):
            kind = "hpuDevice_t"
        else:
            kind = "handle"
    elif re.fullmatch(r"(streamFor\(.*\)|this\._stream\(\))", text, re.S):
        kind = "hpuStream_t"
    elif text == "null":
        kind = "null"
    elif text in ("OUT", "NO_OUT") or text.startswith("out("):
        kind = "output"
    elif OPTIONS_NAME.match(text) or re.fullmatch(r"\w*Options\(.*\)", text, re.S):
        kind = "options"
    elif text.endswith(".dataPtr()"):
        kind = "memory"
    elif re.fullmatch(r".*dtype.*\.value", text, re.S | re.I):
        kind = "dtype"
    elif re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", text):
        kind = "float"
    elif re.fullmatch(r"String\(.*\)|'[^']*'|\"[^\"]*\"", text, re.S):
        kind = "string"
    return text, kind, var


def js_class_at(code: str) -> List[Tuple[int, str]]:
    """(offset, name) of each class statement, in order."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"^class (\w+)", code, re.M)]


def check_js(c: Checker, path: Path, rel: str) -> None:
    text = path.read_text(encoding="utf-8")
    code, strings = js_code(text)
    counted = set()
    classes = js_class_at(code)

    def described(offset: int, args: Optional[List[str]]) -> Optional[list]:
        if args is None or spread(args):
            return None
        cls = next((name for at, name in reversed(classes) if at < offset), None)
        return [js_argument(c.api, a, cls) for a in args]

    for m in re.finditer(r"\bC\.(hpu\w+)\s*\(", code):
        args, _ = js_args(code, m.end() - 1)
        c.arity(f"{rel}:{line_of(text, m.start())}", m.group(1), described(m.start(), args), False, "hpu")
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
        c.arity(f"{rel}:{line_of(text, m.start())}", name, described(m.start(), rest), True, "hpu")
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
