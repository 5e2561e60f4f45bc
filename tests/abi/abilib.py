"""Shared helpers for the ABI and documentation checks: the symbol ledger,
public header declarations (both read by tools/abi/hpuabi.py, the one header
parser), and a small reader for the man(7) pages."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "abi"))
import hpuabi  # noqa: E402

# Sections every man3 page has, in this order (the template, hpuMemAlloc.3).
MAN3_SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "RETURN VALUE", "ERRORS", "EXAMPLE", "SEE ALSO"]


class Failures:
    """Collects every problem so that one run reports all of them."""

    def __init__(self, what):
        self.what = what
        self.items = []

    def add(self, message):
        self.items.append(message)

    def finish(self, checked):
        for m in self.items:
            print(f"FAIL: {m}", file=sys.stderr)
        if self.items:
            print(f"{self.what}: {len(self.items)} problem(s)", file=sys.stderr)
            sys.exit(1)
        print(f"{self.what}: ok ({checked})")


def read_ledger(path, failures=None):
    """abi/symbols.txt -> list of (name, version) in file order."""
    return hpuabi.read_ledger(path, failures)


def read_ledgers(src, failures=None):
    """{name: library} over every ledger of the source tree."""
    out = {}
    for rel, library in hpuabi.LEDGERS:
        for name, _ in read_ledger(os.path.join(src, rel), failures):
            out[name] = library
    return out


def canonical_prototype(text):
    """Whitespace-insensitive form of a C declaration."""
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r"\s*([(),;*\[\]])\s*", r"\1", text)


def header_declarations(include_dir):
    """{name: canonical prototype} of every HPU_API function in include/hpu/*.h."""
    api = hpuabi.parse(os.path.dirname(os.path.abspath(include_dir)))
    return {f.name: canonical_prototype(f.text) for f in api.functions.values()}


def public_headers(include_dir, suffixes):
    out = []
    base = os.path.join(include_dir, "hpu")
    for root, _, files in os.walk(base):
        for fn in files:
            if fn.endswith(suffixes):
                out.append(os.path.relpath(os.path.join(root, fn), include_dir))
    return sorted(out)


# ---- man pages --------------------------------------------------------------

def roff_args(rest):
    """Arguments of a macro line: whitespace separated, "quoted" ("" = quote)."""
    args, i, n = [], 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t":
            i += 1
        if i >= n:
            break
        if rest[i] == '"':
            i += 1
            buf = []
            while i < n:
                if rest[i] == '"':
                    if i + 1 < n and rest[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(rest[i])
                i += 1
            args.append("".join(buf))
        else:
            j = i
            while j < n and rest[j] not in " \t":
                j += 1
            args.append(rest[i:j])
            i = j
    return args


ESCAPES = {
    "e": "\\", "-": "-", "&": "", ".": ".", " ": " ", "~": " ", "0": " ", "|": "", "^": "",
    "(dq": '"', "(aq": "'", "(ga": "`", "(rs": "\\", "(ti": "~", "(ha": "^", "(em": "--",
    "(en": "-", "(bu": "*", "(lq": '"', "(rq": '"', "(oq": "'", "(cq": "'",
    "(co": "(C)", "(mu": "x", "(<=": "<=", "(>=": ">=", "(->": "->", "(<-": "<-", "(+-": "+-",
}


def unescape(text, where="", failures=None):
    """Plain text of a roff text line: escapes resolved, font changes dropped."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            i += 1
            continue
        d = text[i + 1]
        if d in "fF":  # \fB, \fI, \fR, \fP, \f(CW, \f[...]
            if i + 2 < n and text[i + 2] == "(":
                i += 5
            elif i + 2 < n and text[i + 2] == "[":
                i = text.index("]", i) + 1
            else:
                i += 3
            continue
        if d == "(":
            key = text[i + 1:i + 4]
            if key in ESCAPES:
                out.append(ESCAPES[key])
            elif failures is not None:
                failures.add(f"{where}: unknown roff escape \\{key}")
            i += 4
            continue
        if d == "[":
            j = text.index("]", i)
            key = "(" + text[i + 2:j]
            if key in ESCAPES:
                out.append(ESCAPES[key])
            elif failures is not None:
                failures.add(f"{where}: unknown roff escape \\[{key[1:]}]")
            i = j + 1
            continue
        if d == '"':  # comment to end of line
            break
        if d in ESCAPES:
            out.append(ESCAPES[d])
        elif failures is not None:
            failures.add(f"{where}: unknown roff escape \\{d}")
        i += 2
    return "".join(out)


FONT_ALTERNATING = {"BI", "BR", "IB", "IR", "RB", "RI"}


class Page:
    """One man page: its title line, sections in order, and raw lines."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.so = None
        body = [l for l in self.lines if l.strip() and not l.startswith(('.\\"', "'\\\""))]
        if len(body) == 1 and body[0].startswith(".so "):
            self.so = body[0][4:].strip()
        self.th = None
        self.sections = []  # [(name, [lines])]
        for line in self.lines:
            if line.startswith(".TH "):
                self.th = roff_args(line[4:])
            elif line.startswith(".SH "):
                self.sections.append((" ".join(roff_args(line[4:])), []))
            elif self.sections:
                self.sections[-1][1].append(line)

    def section_names(self):
        return [name for name, _ in self.sections]

    def section(self, name):
        for n, lines in self.sections:
            if n == name:
                return lines
        return None

    def text_of(self, lines, failures=None):
        """Plain text of a run of lines; one output line per input line."""
        out = []
        for line in lines:
            where = self.path
            if line.startswith((".", "'")):
                macro, _, rest = line[1:].partition(" ")
                if macro in ("B", "I", "SM", "SB"):
                    out.append(unescape(" ".join(roff_args(rest)), where, failures))
                elif macro in FONT_ALTERNATING:
                    out.append(unescape("".join(roff_args(rest)), where, failures))
                elif macro in ("PP", "P", "LP", "br", "sp", "TP", "RS", "RE", "nf", "fi", "EX", "EE"):
                    out.append("")
                else:
                    out.append("")
            else:
                out.append(unescape(line, where, failures))
        return out

    def names(self):
        """Function names listed in NAME ("a, b \\- what they do")."""
        lines = self.section("NAME")
        if not lines:
            return []
        text = " ".join(self.text_of(lines)).strip()
        head = re.split(r"\s+-\s+", text, maxsplit=1)[0]
        return [n.strip() for n in head.split(",") if n.strip()]

    def example_blocks(self):
        """Each .EX ... .EE block of the EXAMPLE section, as raw roff lines."""
        lines = self.section("EXAMPLE") or []
        blocks, cur = [], None
        for line in lines:
            if line.startswith(".EX"):
                cur = []
            elif line.startswith(".EE"):
                if cur is not None:
                    blocks.append(cur)
                cur = None
            elif cur is not None:
                cur.append(line)
        return blocks


def man_pages(man_dir):
    """[(section number, path)] of every page under man/manN/."""
    out = []
    for sub in sorted(os.listdir(man_dir)):
        m = re.fullmatch(r"man(\d)", sub)
        if not m:
            continue
        d = os.path.join(man_dir, sub)
        for fn in sorted(os.listdir(d)):
            if fn.endswith("." + m.group(1)):
                out.append((m.group(1), os.path.join(d, fn)))
    return out


def tbl_rows(lines):
    """Rows of every tbl(1) table in the lines, as lists of cells (tab-separated).
    T{ ... T} text blocks are joined into one cell."""
    rows, i = [], 0
    while i < len(lines):
        if lines[i].startswith(".TS"):
            i += 1
            while i < len(lines) and not lines[i].rstrip().endswith("."):
                i += 1  # options and the format lines; the last ends with '.'
            i += 1
            while i < len(lines) and not lines[i].startswith(".TE"):
                line = lines[i]
                if line.startswith(".") or line in ("_", "="):
                    i += 1
                    continue
                cells = line.split("\t")
                if cells and cells[-1] == "T{":
                    block = []
                    i += 1
                    while i < len(lines) and not lines[i].startswith("T}"):
                        block.append(lines[i])
                        i += 1
                    cells[-1] = " ".join(block)
                rows.append([unescape(c) for c in cells])
                i += 1
        i += 1
    return rows
