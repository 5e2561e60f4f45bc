"""The man pages are complete, consistent and lint-clean:
- every symbol of the ledger has a man3 page, and every man3 page names only
  exported functions (C++ names with '::' excepted); an alias page is exactly
  ".so man3/<page>.3" and its target's NAME lists the alias;
- .TH names the page and its section; sections come in the required order;
- every SYNOPSIS prototype equals the header's declaration, and names exactly
  the functions of NAME;
- `mandoc -Tlint` reports nothing (except ".so is fragile" for alias pages);
- every ".BR name (N)" cross-reference resolves to a page;
- the status tables of hpuGetErrorName(3) and hpu(7) match HPU_STATUS_MAP;
- every function page says in its DESCRIPTION whether its functions are
  thread-safe;
- rendered (mandoc -Tascii), no page has a mark '^' (a transpose or a power)
  glued to a word with nothing after it, as "b\\(ha" renders "b^" where
  "b\\(haT" was meant.

usage: check_man.py <source dir>"""
import os
import re
import subprocess
import sys

from abilib import (MAN3_SECTIONS, Failures, Page, canonical_prototype, header_declarations, man_pages,
                    read_ledgers, roff_args, tbl_rows, unescape, hpuabi)

# Pages outside libhpu that pages may refer to. Add a name here when a page
# needs another system page.
SYSTEM_PAGES = {
    ("fork", "2"), ("exec", "3"), ("execve", "2"), ("dlopen", "3"), ("dlsym", "3"), ("dlclose", "3"),
    ("free", "3"), ("malloc", "3"), ("memset", "3"), ("memcpy", "3"), ("mmap", "2"), ("exit", "3"),
    ("atexit", "3"), ("pthreads", "7"), ("environ", "7"), ("ld.so", "8"), ("sched_getaffinity", "2"),
    ("pkg-config", "1"), ("cmake", "1"), ("man", "1"), ("mandoc", "1"), ("nproc", "1"), ("getenv", "3"),
    ("setenv", "3"), ("strerror", "3"), ("numa", "7"), ("cpuset", "7"), ("signal", "7"), ("ldconfig", "8"),
}


def check_pages(src, f):
    man_dir = os.path.join(src, "man")
    ledger = set(read_ledgers(src))
    decls = header_declarations(os.path.join(src, "include"))
    pages = {}
    for sec, path in man_pages(man_dir):
        pages[path] = Page(path)

    # Every exported function has a page file.
    for name in sorted(ledger):
        if not os.path.exists(os.path.join(man_dir, "man3", name + ".3")):
            f.add(f"{name} is exported but has no page man/man3/{name}.3")

    named = set()
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, src)
        sec = os.path.basename(os.path.dirname(path))[3:]
        stem = os.path.basename(path)[: -len(sec) - 1]
        if page.so is not None:
            target = os.path.join(man_dir, page.so)
            if not re.fullmatch(r"man\d/[^/]+\.\d", page.so) or target not in pages:
                f.add(f"{rel}: .so {page.so} does not name a page of man/")
            elif pages[target].so is not None:
                f.add(f"{rel}: .so {page.so} is itself an alias page")
            elif stem not in pages[target].names():
                f.add(f"{rel}: is an alias of {page.so}, whose NAME does not list {stem}")
            continue

        th = page.th
        if not th or len(th) < 5:
            f.add(f"{rel}: missing or short .TH line (title, section, date, source, manual)")
        else:
            if th[0] != stem.upper():
                f.add(f"{rel}: .TH title {th[0]} should be {stem.upper()}")
            if th[1] != sec:
                f.add(f"{rel}: .TH section {th[1]} should be {sec}")
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", th[2]):
                f.add(f"{rel}: .TH date {th[2]!r} is not YYYY-MM-DD")

        got = page.section_names()
        if sec == "3":
            if got != MAN3_SECTIONS:
                f.add(f"{rel}: sections are {got}, expected {MAN3_SECTIONS}")
        else:
            # NAME first, SYNOPSIS (required for commands) before DESCRIPTION,
            # SEE ALSO last, each section once.
            canonical = ["NAME", "SYNOPSIS", "DESCRIPTION"]
            need = canonical if sec in ("1", "8") else ["NAME", "DESCRIPTION"]
            order = [s for s in got if s in canonical]
            if (got[:1] != ["NAME"] or any(s not in got for s in need) or order != [s for s in canonical if s in order]
                    or got[-1] != "SEE ALSO" or len(set(got)) != len(got)):
                f.add(f"{rel}: sections are {got}; expected NAME first, then {need[1:]} in that order, "
                      "SEE ALSO last, and each section once")

        names = page.names()
        if not names:
            f.add(f"{rel}: NAME lists nothing (\"name[, name...] \\- summary\")")
        if stem not in names:
            f.add(f"{rel}: NAME {names} does not list the page's own name {stem}")
        if sec != "3":
            continue
        c_names = [n for n in names if "::" not in n]
        for n in c_names:
            named.add(n)
            if n not in ledger:
                f.add(f"{rel}: NAME lists {n}, which is not an exported function (abi/*.txt)")
            elif n != stem and not os.path.exists(os.path.join(man_dir, "man3", n + ".3")):
                f.add(f"{rel}: NAME lists {n} but man/man3/{n}.3 (\".so man3/{stem}.3\") is missing")

        # SYNOPSIS prototypes equal the headers' declarations.
        text = "\n".join(page.text_of(page.section("SYNOPSIS") or [], f))
        protos = {}
        for m in re.finditer(r"^([^\n;#{}]*?\b(hpu\w+)\s*\([^()]*\)\s*;)", text, re.M):
            protos[m.group(2)] = canonical_prototype(m.group(1))
        if c_names and sorted(protos) != sorted(c_names):
            f.add(f"{rel}: SYNOPSIS declares {sorted(protos)}, NAME lists {sorted(c_names)}")
        for n, proto in protos.items():
            if n in decls and decls[n] != proto:
                f.add(f"{rel}: SYNOPSIS has {proto}\n      the header has {decls[n]}")
            elif n not in decls:
                f.add(f"{rel}: SYNOPSIS declares {n}, which no header in include/hpu declares")

        example = "\n".join("\n".join(b) for b in page.example_blocks())
        if "main(" not in example:
            f.add(f"{rel}: EXAMPLE holds no complete program (no main between .EX and .EE)")
    return pages


def check_lint(src, pages, f):
    man_dir = os.path.join(src, "man")
    rels = [os.path.relpath(p, man_dir) for p in sorted(pages)]
    r = subprocess.run(["mandoc", "-Tlint", *rels], cwd=man_dir, capture_output=True, text=True)
    for line in (r.stdout + r.stderr).splitlines():
        m = re.match(r"mandoc: ([^:]+):", line)
        path = os.path.join(man_dir, m.group(1)) if m else None
        if path in pages and pages[path].so is not None and ".so is fragile" in line:
            continue  # alias pages are .so by convention
        f.add(f"man/{line[len('mandoc: '):] if line.startswith('mandoc: ') else line}")


def check_xrefs(src, pages, f):
    man_dir = os.path.join(src, "man")
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, src)
        for n, line in enumerate(page.lines, 1):
            if not re.match(r"\.(BR|RB|IR|RI|BI|IB) ", line):
                continue
            args = [unescape(a) for a in roff_args(line[4:])]
            for i in range(len(args) - 1):
                m = re.match(r"\((\d)\)", args[i + 1])
                if not m or not re.fullmatch(r"[\w.:+-]+", args[i]):
                    continue
                name, sec = args[i], m.group(1)
                if os.path.exists(os.path.join(man_dir, f"man{sec}", f"{name}.{sec}")):
                    continue
                if (name, sec) in SYSTEM_PAGES:
                    continue
                f.add(f"{rel}:{n}: {name}({sec}) is not a page of man/ nor a known system page "
                      "(tests/abi/check_man.py SYSTEM_PAGES)")


def check_thread_safety(src, pages, f):
    for path, page in sorted(pages.items()):
        if page.so is not None or os.path.basename(os.path.dirname(path)) != "man3":
            continue
        text = " ".join(page.text_of(page.section("DESCRIPTION") or []))
        if not re.search(r"thread-safe", text, re.I):
            f.add(f"{os.path.relpath(path, src)}: DESCRIPTION does not say whether the functions are thread-safe "
                  "(such as \"The function is thread-safe.\")")


def check_rendered_marks(src, pages, f):
    man_dir = os.path.join(src, "man")
    for path, page in sorted(pages.items()):
        if page.so is not None:
            continue
        r = subprocess.run(["mandoc", "-Tascii", os.path.relpath(path, man_dir)], cwd=man_dir, capture_output=True,
                           text=True)
        text = re.sub(r".\x08", "", r.stdout)  # bold and underline are overstrikes
        for n, line in enumerate(text.splitlines(), 1):
            for m in re.finditer(r"\S\^(?![\w(-])", line):
                f.add(f"{os.path.relpath(path, src)}: renders {line.strip()!r} (line {n} of mandoc -Tascii): "
                      f"the mark '^' at column {m.start() + 2} has nothing after it (write \\(haT for a transpose)")


def check_status_tables(src, f):
    statuses = hpuabi.parse(src).statuses
    if not statuses:
        f.add("include/hpu/status.h: no X(name, number, text) entries in HPU_STATUS_MAP")
        return
    expect3 = [[s.name, str(s.value), s.text] for s in statuses]
    for page_rel, columns in (("man/man3/hpuGetErrorName.3", 3), ("man/man7/hpu.7", 2)):
        path = os.path.join(src, page_rel)
        if not os.path.exists(path):
            f.add(f"{page_rel} is missing (it holds the status table)")
            continue
        rows = [r for r in tbl_rows(Page(path).lines) if r and re.fullmatch(r"HPU_(SUCCESS|ERROR_\w+)", r[0])]
        got = [[c.strip() for c in r[:columns]] for r in rows]
        want = [e[:columns] for e in expect3]
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else "(nothing)"
            w = want[i] if i < len(want) else "(nothing)"
            if g != w:
                f.add(f"{page_rel}: status table row {i + 1} is {g}; HPU_STATUS_MAP has {w}")


def main(src):
    f = Failures("man pages")
    pages = check_pages(src, f)
    check_lint(src, pages, f)
    check_xrefs(src, pages, f)
    check_status_tables(src, f)
    check_thread_safety(src, pages, f)
    check_rendered_marks(src, pages, f)
    f.finish(f"{len(pages)} pages")


if __name__ == "__main__":
    main(*sys.argv[1:])
