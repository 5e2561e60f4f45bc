"""Every man page EXAMPLE that holds a C program is extracted, compiled
against the source and build trees with warnings as errors, linked with the
built libhpu (and libhpu-trainer for pages that include <hpu/trainer.h>), and
run; each must exit 0.

usage: check_examples.py <source dir> <build dir> <libhpu.so> <libhpu-trainer.so> <cc> [page...]"""
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from abilib import Failures, Page, man_pages, unescape

CFLAGS = ["-Wall", "-Wextra", "-Werror"]


def program_of(page, f):
    """The C program of a page's EXAMPLE, or None when it holds none."""
    blocks = page.example_blocks()
    code = "\n".join("\n".join(unescape(line, page.path, f) for line in b) for b in blocks)
    return code + "\n" if "main(" in code else None


def run_one(job, tmp, src, build, libdirs, cc, env):
    rel, code = job
    stem = rel.replace("/", "_").replace(".", "_")
    c = os.path.join(tmp, stem + ".c")
    exe = os.path.join(tmp, stem)
    with open(c, "w") as fh:
        fh.write(code)
    links = []
    for name, libdir in libdirs:
        if name == "hpu" or f"<hpu/{name[4:]}.h>" in code:
            links += ["-L", libdir, f"-l{name}", f"-Wl,-rpath,{libdir}"]
    cmd = [cc, *CFLAGS, "-I", os.path.join(src, "include"), "-I", os.path.join(build, "include"), c, "-o", exe,
           *links]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return f"{rel}: EXAMPLE does not compile:\n{r.stderr.strip()}"
    try:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=60, env=env, cwd=tmp)
    except subprocess.TimeoutExpired:
        return f"{rel}: EXAMPLE did not finish within 60 s"
    if r.returncode != 0:
        return (f"{rel}: EXAMPLE exited with {r.returncode}\n  stdout: {r.stdout.strip()}\n"
                f"  stderr: {r.stderr.strip()}")
    return None


def main(src, build, lib, trainer_lib, cc, *only):
    f = Failures("man page examples")
    libdirs = [("hpu-trainer", os.path.dirname(os.path.abspath(trainer_lib))),
               ("hpu", os.path.dirname(os.path.abspath(lib)))]
    # The examples run with the default configuration, whatever the caller's.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPU_", "PT_HPU_")) and
           k not in ("LOWER_LIST", "FP32_LIST")}
    jobs = []
    for sec, path in man_pages(os.path.join(src, "man")):
        rel = os.path.relpath(path, src)
        if only and os.path.basename(path) not in only:
            continue
        page = Page(path)
        if page.so is not None:
            continue
        code = program_of(page, f)
        if code is None:
            if sec == "3":
                f.add(f"{rel}: EXAMPLE holds no C program")
            continue
        jobs.append((rel, code))
    with tempfile.TemporaryDirectory(prefix="hpu-examples-") as tmp:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for err in pool.map(lambda j: run_one(j, tmp, src, build, libdirs, cc, env), jobs):
                if err:
                    f.add(err)
    f.finish(f"{len(jobs)} examples compiled and ran")


if __name__ == "__main__":
    main(*sys.argv[1:])
