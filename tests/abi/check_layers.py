"""The layers of src/ use only the layers docs/ARCHITECTURE.md's "Layers" table
allows them, and the trainer, bench/ and examples/ only the public headers.

Reads the table (| `layer` | what it holds | `a`, `b` ... |, or "nothing")
and checks every #include "<folder>/..." of every source under src/<layer>/:
<folder> must be the layer itself or one it may use. Every folder of src/
must have a row. trainer/, bench/ and examples/ may not include a file of
src/ (tools/hpu_smi.cpp may include device/smi_layout.hpp, as the document
says).

usage: check_layers.py <source dir>"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".cc", ".cpp", ".h", ".hpp", ".inc")
# Files outside src/ that may include one file of src/: (path, include).
ALLOWED_OUTSIDE = {("tools/hpu_smi.cpp", "device/smi_layout.hpp")}


def read_table(doc):
    """{layer: set of layers it may use} from the "## Layers" section."""
    text = open(doc, encoding="utf-8").read()
    section = re.search(r"^## Layers\n(.*?)(?=^## )", text, re.M | re.S)
    if not section:
        raise SystemExit(f"{doc}: no \"## Layers\" section")
    table = {}
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`\w+`", cells[0]):
            continue
        table[cells[0].strip("`")] = set(re.findall(r"`(\w+)`", cells[2]))
    if not table:
        raise SystemExit(f"{doc}: the Layers section has no table rows")
    return table


def sources(root):
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(SOURCES):
                yield os.path.join(folder, name)


def main(src):
    table = read_table(os.path.join(src, "docs", "ARCHITECTURE.md"))
    failures = []
    layers = sorted(d for d in os.listdir(os.path.join(src, "src")) if os.path.isdir(os.path.join(src, "src", d)))
    for layer in layers:
        if layer not in table:
            failures.append(f"src/{layer}/ has no row in docs/ARCHITECTURE.md's Layers table")
    for layer in layers:
        allowed = table.get(layer, set()) | {layer}
        for path in sources(os.path.join(src, "src", layer)):
            rel = os.path.relpath(path, src)
            for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
                top = inc.split("/")[0]
                if "/" in inc and top in layers and top not in allowed:
                    failures.append(f"{rel} includes \"{inc}\": {layer} may use "
                                    f"{', '.join(sorted(table.get(layer, set()))) or 'nothing'}, not {top}")
    for outside in ("trainer", "bench", "examples", "tools"):
        for path in sources(os.path.join(src, outside)):
            rel = os.path.relpath(path, src)
            for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
                if inc.split("/")[0] in layers and (rel, inc) not in ALLOWED_OUTSIDE:
                    failures.append(f"{rel} includes \"{inc}\", a file of src/: {outside}/ uses the public headers")
    for f in failures:
        print(f)
    print(f"{len(failures)} include(s) break the layers" if failures else "every include keeps to the layers")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
