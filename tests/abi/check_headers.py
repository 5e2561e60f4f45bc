"""Every public header compiles alone: each include/hpu/*.h as C99 and as
C++17, each include/hpu/**/*.hpp as C++17, all warnings as errors; every
function the C headers declare is in the ledger, and a program that takes the
address of each one links against the built library and runs.

usage: check_headers.py <source dir> <build dir> <libhpu.so> <libhpu-trainer.so> <cc> <c++>"""
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from abilib import Failures, header_declarations, public_headers, read_ledgers

C_FLAGS = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wstrict-prototypes", "-Werror"]
CXX_FLAGS = ["-std=c++17", "-pedantic", "-Wall", "-Wextra", "-Werror"]


def main(src, build, lib, trainer_lib, cc, cxx):
    f = Failures("public headers")
    incs = ["-I", os.path.join(src, "include"), "-I", os.path.join(build, "include")]
    headers_c = public_headers(os.path.join(src, "include"), (".h",))
    headers_cxx = public_headers(os.path.join(src, "include"), (".hpp",))
    jobs = []
    with tempfile.TemporaryDirectory(prefix="hpu-headers-") as tmp:
        def compile_one(compiler, flags, header, lang):
            tu = os.path.join(tmp, header.replace("/", "_") + (".c" if lang == "c" else ".cpp"))
            with open(tu, "w") as fh:
                fh.write(f"#include <{header}>\n#include <{header}> /* include guard */\n")
            r = subprocess.run([compiler, *flags, *incs, "-fsyntax-only", tu], capture_output=True, text=True)
            if r.returncode != 0:
                return f"{header} does not compile alone as {lang}:\n{r.stderr.strip()}"
            return None

        for h in headers_c:
            jobs.append((cc, C_FLAGS, h, "c"))
            jobs.append((cxx, CXX_FLAGS, h, "c++"))
        for h in headers_cxx:
            jobs.append((cxx, CXX_FLAGS, h, "c++"))
        with ThreadPoolExecutor(max_workers=2) as pool:
            for err in pool.map(lambda j: compile_one(*j), jobs):
                if err:
                    f.add(err)

        decls = header_declarations(os.path.join(src, "include"))
        ledger = set(read_ledgers(src))
        for name in sorted(set(decls) - ledger):
            f.add(f"{name} is declared with HPU_API in include/hpu but missing from the ledgers (abi/*.txt)")
        for name in sorted(ledger - set(decls)):
            f.add(f"{name} is in a ledger (abi/*.txt) but no header in include/hpu declares it")

        # Every declared function links: take the address of each.
        prog = os.path.join(tmp, "link_all.c")
        with open(prog, "w") as fh:
            fh.write("#include <hpu/hpu.h>\n")
            for h in headers_c:
                fh.write(f"#include <{h}>\n")
            fh.write("typedef void (*fn_t)(void);\nstatic fn_t volatile all[] = {\n")
            for name in sorted(decls):
                fh.write(f"  (fn_t){name},\n")
            fh.write("  0\n};\nint main(void) {\n  int n = 0;\n"
                     "  while (all[n]) ++n;\n"
                     f"  return n != {len(decls)};\n}}\n")
        exe = os.path.join(tmp, "link_all")
        links = []
        for path, name in ((trainer_lib, "hpu-trainer"), (lib, "hpu")):
            libdir = os.path.dirname(os.path.abspath(path))
            links += ["-L", libdir, f"-l{name}", f"-Wl,-rpath,{libdir}"]
        r = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", *incs, prog, "-o", exe, *links],
                           capture_output=True, text=True)
        if r.returncode != 0:
            f.add(f"a program using every declared function does not link:\n{r.stderr.strip()}")
        else:
            r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                f.add(f"link_all exited with {r.returncode}: {r.stderr.strip()}")
    f.finish(f"{len(headers_c)} C headers, {len(headers_cxx)} C++ headers, {len(decls)} functions link")


if __name__ == "__main__":
    main(*sys.argv[1:])
