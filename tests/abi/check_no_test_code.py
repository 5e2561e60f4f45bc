"""libhpu.so carries no test double: none of the names of the fake libibverbs
(tests/support/fake_ibverbs: its devices, shared-memory rings and fault
variable, and those it had when it was a test adapter inside libhpu) is in the
library's bytes, and no libibverbs function is defined in it (libhpu dlopens
libibverbs; it neither links nor contains one).

usage: check_no_test_code.py <lib.so>"""
import subprocess
import sys

MARKERS = [b"hpu_test0", b"hpu_test1", b"hpu-fake-ibv", b"hpu-ibtest", b"HPU_FAKE_IBV_FAULT", b"uverbs-test",
           b"fake-ibverbs", b"test adapter"]


def main(lib):
    failures = []
    with open(lib, "rb") as f:
        data = f.read()
    for m in MARKERS:
        if m in data:
            failures.append(f"{lib} contains \"{m.decode()}\", a name of the fake libibverbs (tests/support/fake_ibverbs)")
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        name = line.split()[-1]
        if name.startswith(("ibv_", "_ibv_")):
            failures.append(f"{lib} defines {name}, a libibverbs function")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
