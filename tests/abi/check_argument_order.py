"""Every function declared in include/hpu/*.h orders its arguments by the
rules of hpu(7), "Argument order":

1. a stream (hpuStream_t) is the first argument;
2. an out-pointer comes first only in a creator (a handle, an allocation or a
   unique id comes back through it) or when every argument is an out-pointer;
3. otherwise out-pointers come last: after the first out-pointer, only
   out-pointers follow;
4. an options struct (const hpu*Options_t *) comes after every other input:
   only out-pointers follow it.

An out-pointer is a non-const pointer to a handle, a number, a type or status
enum, a struct the function fills, or a char pointer (char **); a void *
(device memory or the caller's data) counts as an input.

The declarations are read by tools/abi/hpuabi.py, the one header parser.

usage: check_argument_order.py <source dir>"""
import re
import sys

from abilib import Failures, hpuabi

HANDLES = {"hpuDevice_t", "hpuStream_t", "hpuEvent_t", "hpuTensor_t", "hpuComm_t"}
# What a creator makes: a handle, device memory (void **), a unique id.
CREATED = HANDLES | {"void *", "hpuUniqueId_t"}
# Non-const pointers through which results come back (besides handles).
RESULTS = {"int", "float", "double", "size_t", "int64_t", "uint64_t", "char *", "hpuDataType_t", "hpuStatus_t",
           "hpuLogLevel_t", "hpuMemStats_t", "hpuDeviceProperties_t", "hpuRandomState_t"}
# Functions not yet by rule 4, and why.
KNOWN: dict = {}


def pointee(ptype):
    """'hpuTensor_t *' -> 'hpuTensor_t', 'char **' -> 'char *'; None if not a non-const pointer."""
    if not ptype.endswith("*") or ptype.startswith("const "):
        return None
    return ptype[:-1].rstrip()


def is_out(ptype):
    base = pointee(ptype)
    return base is not None and (base in HANDLES or base in RESULTS or base in CREATED)


def main(src):
    f = Failures("argument order")
    functions = hpuabi.parse(src).functions
    for fn, function in sorted(functions.items()):
        ps = [(p.ctype, p.name) for p in function.params]
        outs = [is_out(t) for t, _ in ps]
        for i, (t, n) in enumerate(ps):
            if t == "hpuStream_t" and i != 0:
                f.add(f"{fn}: {n} is argument {i + 1}; a stream comes first (rule 1)")
        if outs and outs[0] and not all(outs):
            if pointee(ps[0][0]) not in CREATED:
                f.add(f"{fn}: the out-pointer {ps[0][1]} comes first, but {fn} creates no handle (rule 2)")
        first = next((i for i, o in enumerate(outs) if o and i > 0), None)
        if first is not None:
            for i in range(first, len(ps)):
                if not outs[i]:
                    f.add(f"{fn}: {ps[i][1]} follows the out-pointer {ps[first][1]} (rule 3)")
        for i, (t, n) in enumerate(ps):
            if re.match(r"^const hpu\w+Options_t \*$", t):
                for j in range(i + 1, len(ps)):
                    if not outs[j] and fn not in KNOWN:
                        f.add(f"{fn}: {ps[j][1]} follows the options {n} (rule 4)")
    f.finish(f"{len(functions)} functions")


if __name__ == "__main__":
    main(*sys.argv[1:])
