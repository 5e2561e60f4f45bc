"""libhpu's public C headers (include/hpu/*.h) as data: the one header parser.

Everything that must agree with the headers reads them through this module:
the bindings' generated declarations (tools/abi/gen_bindings.py), the
table-driven bad-input test (tests/badinput/gen.py) and the ABI checks
(tests/abi). It reads the subset of C the headers are written in: HPU_API
function declarations, typedefs of opaque handles, enums, structs and function
pointers, integer #defines and the HPU_STATUS_MAP X-macro. A declaration it
cannot read is an error, not something skipped.

Standard library only; runs with /usr/bin/python3.

    api = hpuabi.parse(source_dir)
    api.functions["hpuMemAlloc"].params   # [Param("ptr", "void **"), ...]
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# The ledgers of exported C functions and the library that exports each
# (libhpu-trainer has its own).
LEDGERS = (("abi/symbols.txt", "hpu"), ("abi/trainer-symbols.txt", "hpu-trainer"))
LEDGER_LINE = re.compile(r"^(hpu[A-Z][A-Za-z0-9]*)[ \t]+([0-9]+\.[0-9]+)[ \t]*$")

# Scalar C types the headers use, by name.
SCALARS = ("char", "int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "unsigned long long",
           "float", "double", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
           "int64_t", "uint64_t")


class ParseError(Exception):
    pass


@dataclass
class Param:
    name: str
    ctype: str  # normalised C type: "const int64_t *", "hpuTensor_t *", "char **"

    @property
    def base(self) -> str:
        """The type without const and pointers: "int64_t", "hpuTensor_t"."""
        return self.ctype.replace("const", "").replace("*", "").strip()

    @property
    def pointers(self) -> int:
        return self.ctype.count("*")

    @property
    def is_const(self) -> bool:
        """The pointed-to data is const (for pointers), or the value is."""
        return self.ctype.startswith("const ")


@dataclass
class Function:
    name: str
    ret: str
    params: List[Param]
    header: str          # "memory.h"
    text: str            # the declaration as written (comments removed)
    library: Optional[str] = None  # "hpu" or "hpu-trainer" (from the ledgers), None if in no ledger

    @property
    def returns_status(self) -> bool:
        return self.ret == "hpuStatus_t"


@dataclass
class Field:
    name: str
    ctype: str
    count: Optional[int] = None  # array length, for "char name[64]"


@dataclass
class Struct:
    name: str   # typedef name: "hpuMemStats_t"
    fields: List[Field]
    header: str

    @property
    def sized(self) -> bool:
        """Starts with size_t struct_size (DESIGN: structs that may grow)."""
        return bool(self.fields) and self.fields[0].name == "struct_size"


@dataclass
class Enum:
    name: str   # typedef name: "hpuDataType_t"
    values: List[Tuple[str, int]]
    header: str


@dataclass
class Status:
    name: str   # "HPU_ERROR_NOT_FOUND"
    value: int
    text: str   # hpuGetErrorString's "not found"

    @property
    def short(self) -> str:
        """The name without its prefix: "NOT_FOUND", "SUCCESS"."""
        return re.sub(r"^HPU_(ERROR_)?", "", self.name)


@dataclass
class Callback:
    name: str   # "hpuLogCallback_t"
    ret: str
    params: List[Param]
    header: str


@dataclass
class Api:
    headers: List[str] = field(default_factory=list)
    functions: Dict[str, Function] = field(default_factory=dict)
    structs: Dict[str, Struct] = field(default_factory=dict)
    enums: Dict[str, Enum] = field(default_factory=dict)
    handles: Dict[str, str] = field(default_factory=dict)     # "hpuDevice_t" -> "hpuDevice_st"
    callbacks: Dict[str, Callback] = field(default_factory=dict)
    foreign: List[str] = field(default_factory=list)          # "struct DLManagedTensor": declared, not defined
    constants: Dict[str, int] = field(default_factory=dict)   # integer #defines
    statuses: List[Status] = field(default_factory=list)
    ledger: List[Tuple[str, str, str]] = field(default_factory=list)  # (name, version, library) in file order

    def kind_of(self, ctype: str) -> str:
        """What a type names once const and pointers are removed: "handle", "enum", "struct",
        "callback", "foreign" (another library's struct, taken by pointer), "scalar", "void" or
        "status"."""
        base = ctype.replace("const", "").replace("*", "").strip()
        if base == "hpuStatus_t":
            return "status"
        if base in self.handles:
            return "handle"
        if base in self.enums:
            return "enum"
        if base in self.structs:
            return "struct"
        if base in self.callbacks:
            return "callback"
        if base in self.foreign:
            return "foreign"
        if base == "void":
            return "void"
        if base in SCALARS:
            return "scalar"
        raise ParseError(f"unknown type {ctype!r}")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def normalise_type(text: str) -> str:
    """A type as the headers write it: "const int64_t *", "void **", "const char *const *"."""
    out = ""
    for tok in re.findall(r"\w+|\*", text):
        if tok == "*":
            out += "*" if out.endswith("*") else " *"
        else:
            out += tok if out.endswith("*") or not out else " " + tok
    return out


def read_ledger(path: Path, failures=None) -> List[Tuple[str, str]]:
    """A ledger (abi/symbols.txt) -> [(name, version)] in file order; a malformed line
    is reported to `failures` (an object with add(message)) when given."""
    entries = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = LEDGER_LINE.match(line)
        if not m:
            if failures is not None:
                failures.add(f"{path}:{n}: not \"hpu<Name> <major>.<minor>\": {line!r}")
            continue
        entries.append((m.group(1), m.group(2)))
    return entries


def header_order(include_dir: Path) -> List[Path]:
    """include/hpu/*.h, those hpu.h includes first in its order, then the rest by name."""
    hdir = include_dir / "hpu"
    names = sorted(p.name for p in hdir.glob("*.h"))
    umbrella = (hdir / "hpu.h").read_text(encoding="utf-8") if (hdir / "hpu.h").exists() else ""
    first = [n for n in re.findall(r"#include <hpu/(\w+\.h)>", umbrella) if n in names]
    return [hdir / n for n in first + [n for n in names if n not in first]]


_INT_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift,
            ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
            ast.BitXor: operator.xor, ast.USub: operator.neg, ast.Invert: operator.invert}


def _eval_int(expr: str, constants: Dict[str, int], where: str) -> int:
    """An integer constant expression of the headers: numbers (with u/l suffixes), names of
    earlier constants, + - * << >> | & ^ ~ and parentheses."""
    text = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr.strip())

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            return _INT_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _INT_OPS:
            return _INT_OPS[type(node.op)](value(node.operand))
        raise ParseError(f"{where}: cannot read {expr.strip()!r} as an integer")

    try:
        return value(ast.parse(text, mode="eval").body)
    except SyntaxError:
        raise ParseError(f"{where}: cannot read {expr.strip()!r} as an integer") from None


def _params(text: str, where: str) -> List[Param]:
    text = " ".join(text.split())
    if text in ("", "void"):
        return []
    out = []
    for p in text.split(","):
        m = re.fullmatch(r"\s*(.*?[\s*])(\w+)\s*", p)
        if not m or not m.group(1).strip():
            raise ParseError(f"{where}: cannot read parameter {p.strip()!r} (every parameter needs a name)")
        out.append(Param(m.group(2), normalise_type(m.group(1))))
    return out


def _fields(body: str, constants: Dict[str, int], where: str) -> List[Field]:
    out = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        first, *more = decl.split(",")
        m = re.fullmatch(r"(.*?[\s*])(\w+)\s*(?:\[([^\]]+)\])?\s*", first)
        if not m or not m.group(1).strip():
            raise ParseError(f"{where}: cannot read field {decl!r}")
        ctype = normalise_type(m.group(1))
        base = ctype.rstrip(" *")  # "double beta1, *p": later declarators bring their own stars
        items = [("", m.group(2), m.group(3))]
        for item in more:
            fm = re.fullmatch(r"\s*(\**)\s*(\w+)\s*(?:\[([^\]]+)\])?\s*", item)
            if not fm:
                raise ParseError(f"{where}: cannot read field {item.strip()!r} of {decl!r}")
            items.append((fm.group(1), fm.group(2), fm.group(3)))
        for i, (stars, name, count) in enumerate(items):
            t = ctype if i == 0 else normalise_type(base + " " + stars)
            out.append(Field(name, t, _eval_int(count, constants, where) if count else None))
    return out


STATUS_ENTRY = re.compile(r'X\(\s*(HPU_\w+)\s*,\s*(\d+)\s*,\s*"([^"]*)"\s*\)')


def _parse_header(api: Api, path: Path) -> None:
    name = path.name
    raw = strip_comments(path.read_text(encoding="utf-8")).replace("\\\n", " ")
    code_lines = []
    for line in raw.split("\n"):
        s = line.strip()
        if not s.startswith("#"):
            code_lines.append(line)
            continue
        m = re.match(r"#\s*define\s+(HPU_\w+)\s+(\S.*)$", s)
        if m and re.fullmatch(r"[\w\s()+\-*<>|&^~]+", m.group(2)) and re.search(r"\d", m.group(2)):
            try:  # an integer constant; other macros (_INIT initialisers, HPU_API) are not data
                api.constants[m.group(1)] = _eval_int(m.group(2), api.constants, name)
            except ParseError:
                pass
        elif re.match(r"#\s*define\s+HPU_STATUS_MAP\(X\)", s):
            api.statuses = [Status(n, int(v), t) for n, v, t in STATUS_ENTRY.findall(s)]
            if not api.statuses:
                raise ParseError(f"{name}: HPU_STATUS_MAP has no X(name, value, text) entries")
    code = " ".join(code_lines)
    code = re.sub(r"\bHPU_EXTERN_C_(BEGIN|END)\b", " ", code)

    for m in re.finditer(r"\btypedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;", code):
        api.handles[m.group(2)] = m.group(1)
    for m in re.finditer(r"(?<!typedef )\bstruct\s+(\w+)\s*;", code):
        api.foreign.append("struct " + m.group(1))
    for m in re.finditer(r"\btypedef\s+enum\s+\w*\s*\{([^}]*)\}\s*(\w+)\s*;", code):
        body, tname = m.group(1), m.group(2)
        if "HPU_STATUS_MAP" in body:
            values = [(s.name, s.value) for s in api.statuses]
        else:
            values, nxt = [], 0
            for item in body.split(","):
                item = item.strip()
                if not item:
                    continue
                em = re.fullmatch(r"(\w+)(?:\s*=\s*(.+))?", item)
                if not em:
                    raise ParseError(f"{name}: cannot read enumerator {item!r} of {tname}")
                nxt = _eval_int(em.group(2), api.constants, name) if em.group(2) else nxt
                values.append((em.group(1), nxt))
                api.constants[em.group(1)] = nxt
                nxt += 1
        api.enums[tname] = Enum(tname, values, name)
    for m in re.finditer(r"\btypedef\s+struct\s+\w*\s*\{([^}]*)\}\s*(\w+)\s*;", code):
        api.structs[m.group(2)] = Struct(m.group(2), _fields(m.group(1), api.constants, f"{name}: {m.group(2)}"), name)
    for m in re.finditer(r"\btypedef\s+([\w\s\*]+?)\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)\s*;", code):
        api.callbacks[m.group(2)] = Callback(m.group(2), normalise_type(m.group(1)),
                                             _params(m.group(3), f"{name}: {m.group(2)}"), name)
    for m in re.finditer(r"\bHPU_API\b([^;{}]*);", code):
        decl = " ".join(m.group(1).split())
        dm = re.fullmatch(r"([\w\s\*]+?)\s*\b(hpu\w+)\s*\(([^()]*)\)", decl)
        if not dm:
            raise ParseError(f"{name}: cannot read the declaration {decl!r}")
        fname = dm.group(2)
        if fname in api.functions:
            raise ParseError(f"{name}: {fname} is declared twice")
        api.functions[fname] = Function(fname, normalise_type(dm.group(1)), _params(dm.group(3), f"{name}: {fname}"),
                                        name, decl + ";")


def parse(src) -> Api:
    """Reads SOURCE_DIR/include/hpu/*.h and the ledgers abi/*.txt."""
    src = Path(src)
    api = Api()
    for path in header_order(src / "include"):
        api.headers.append(path.name)
        _parse_header(api, path)
    for rel, library in LEDGERS:
        ledger = src / rel
        if not ledger.exists():
            continue
        for fname, version in read_ledger(ledger):
            api.ledger.append((fname, version, library))
            if fname in api.functions:
                api.functions[fname].library = library
    # Every type a declaration names must be one the headers define.
    for f in api.functions.values():
        for t in [f.ret] + [p.ctype for p in f.params]:
            api.kind_of(t)
    for s in api.structs.values():
        for fl in s.fields:
            api.kind_of(fl.ctype)
    return api


if __name__ == "__main__":  # a summary, for a reader
    import sys
    a = parse(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    print(f"{len(a.functions)} functions, {len(a.structs)} structs, {len(a.enums)} enums, "
          f"{len(a.handles)} handles, {len(a.callbacks)} callbacks, {len(a.statuses)} statuses, "
          f"{len(a.constants)} constants")
    for f in a.functions.values():
        print(f"  [{f.library}] {f.ret} {f.name}({', '.join(p.ctype + ' ' + p.name for p in f.params)})")
