#!/usr/bin/env python3
"""Generates the table-driven bad-input test from the public headers and the
golden export lists (abi/symbols.txt, abi/trainer-symbols.txt): every exported function that returns
hpuStatus_t is called once per parameter with that parameter made bad (NULL,
a closed handle, a handle of another kind, an out-of-range enum, a huge or
negative number; device memory one past its end, overrun, freed or of a
closed device; shapes and strides that overflow; row numbers past the end of
memory) and every other parameter plausible. A new exported function is
covered the moment it is in the list.

usage: gen.py SOURCE_DIR OUTPUT.cpp
"""
import fnmatch
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "abi"))
import hpuabi  # noqa: E402  (the one header parser)

HANDLES = {"hpuDevice_t": "device", "hpuStream_t": "stream", "hpuEvent_t": "event",
           "hpuTensor_t": "tensor", "hpuComm_t": "comm"}
ENUMS = {"hpuDataType_t": "HPU_FLOAT32", "hpuRedOp_t": "(hpuRedOp_t)0", "hpuMemcpyKind_t": "HPU_MEMCPY_HOST_TO_DEVICE",
         "hpuLogLevel_t": "HPU_LOG_WARN", "hpuAutocastList_t": "(hpuAutocastList_t)0",
         "hpuReduction_t": "(hpuReduction_t)0", "hpuStatus_t": "HPU_SUCCESS"}
# Parameters that take device memory (the plausible call passes fx.dev_mem,
# a live allocation of kDevBytes on the fixture's device), and the arguments
# that make the plausible call touch at least 2 bytes of it.
DEVICE_MEMORY = {
    "hpuMemcpy": ["dst"], "hpuMemcpyAsync": ["dst"], "hpuMemcpyRowsAsync": ["dst"],
    "hpuMemset": ["dst"], "hpuMemsetAsync": ["dst"],
    "hpuAllreduce": ["send", "recv"], "hpuBroadcast": ["send", "recv"], "hpuReduce": ["send", "recv"],
    "hpuAllgather": ["send", "recv"], "hpuReduceScatter": ["send", "recv"], "hpuAlltoall": ["send", "recv"],
    "hpuSend": ["send"], "hpuRecv": ["recv"], "hpuTensorWrap": ["data"],
}
TWO_BYTES = {"hpuMemcpy": {"bytes": "2"}, "hpuMemcpyAsync": {"bytes": "2"}, "hpuMemset": {"bytes": "2"},
             "hpuMemsetAsync": {"bytes": "2"}, "hpuMemcpyRowsAsync": {"count": "2"},
             "hpuTensorWrap": {"shape": "fx.shape4", "strides": "NULL"}}
# Collectives take memory of the communicator's device only.
COLLECTIVES = {"hpuAllreduce", "hpuBroadcast", "hpuReduce", "hpuAllgather", "hpuReduceScatter", "hpuAlltoall",
               "hpuSend", "hpuRecv"}
# Plausible values that make a function's call with every argument plausible
# succeed, so that each bad argument is the one its check meets:
# (function pattern, parameter pattern, expression); tensors are given only to
# parameters of type hpuTensor_t (not to the ops' outputs).
PLAUSIBLE = [
    ("hpuEventElapsedTime", "start", "fx.recorded_event"), ("hpuEventElapsedTime", "end", "fx.recorded_event"),
    ("hpuMemFree", "ptr", "fx.fresh_allocation()"),
    ("hpuAutocastPush", "dtype", "HPU_BFLOAT16"),
    ("hpuAutocastSetOpList", "names", "fx.op_names"), ("hpuAutocastGetOpDtype", "op", '"mm"'),
    ("hpuConfigGet", "name", '"HPU_NUM_DEVICES"'),
    ("hpuTensorCopy*Host", "bytes", "16"), ("hpuTensorReshape", "shape", "fx.shape4"),
    ("hpuTensorFillUniform", "low", "0.0"),
    ("hpuBmm*", "[!s]*", "fx.t3"),
    ("hpuLinear", "bias", "fx.vec2"),
    ("hpu*Loss*", "target", "fx.target"), ("hpu*Loss*", "weight", "fx.vec2"), ("hpu*Loss*", "grad_loss", "fx.vec2"),
    ("hpuLayerNorm*", "weight", "fx.vec2"), ("hpuLayerNorm*", "bias", "fx.vec2"),
    ("hpuLayerNorm*", "mean", "fx.vec2"), ("hpuLayerNorm*", "rstd", "fx.vec2"),
    ("hpuDropout*", "p", "0.5"), ("hpuDropoutBackward", "mask", "fx.mask"),
    ("hpuEmbedding*", "indices", "fx.target"),
    ("hpuSumBackward", "grad_out", "fx.t12"), ("hpuMeanBackward", "grad_out", "fx.t12"),
    ("hpuCommInitRank", "rank", "0"), ("hpuCommInitRank", "id", "&fx.unique_id"),
    ("hpuCommInitAll", "devs", "&fx.device"),
    ("hpuBroadcast", "root", "0"), ("hpuReduce", "root", "0"),
    ("hpuSquaredNorm", "tensors", "&fx.tensor"),
    ("hpuLogWrite", "component", '"badinput"'),
    ("hpuTensorFromDLPack", "managed", "fx.exported()"),
    ("hpuTensorFromDLPackVersioned", "managed", "fx.exported_versioned()"),
]
# Structs the caller fills with their _INIT macro, by type: the fixture's copy.
STRUCTS = {"hpuDeviceProperties_t": "fx.props", "hpuMemStats_t": "fx.stats", "hpuSgdOptions_t": "fx.sgd",
           "hpuAdamwOptions_t": "fx.adamw", "hpuMatmulOptions_t": "fx.matmul",
           "hpuRandomState_t": "fx.random_state", "hpuLossOptions_t": "fx.loss",
           "hpuLayerNormOptions_t": "fx.layer_norm", "hpuTrainerPredictOptions_t": "fx.trainer_predict"}
# Functions whose plausible call cannot succeed in the table, and why.
BASELINE_FAILS = {
    "hpuCommInitFromEnv": "it needs a launcher's environment",
    "hpuSend": "it needs a second rank", "hpuRecv": "it needs a second rank",
    "hpuTrainerRunJob": "a valid job would train a model",
    "hpuTrainerPredict": "it needs a checkpoint file",
}
INTS = {"int", "int32_t", "int64_t", "long", "unsigned", "uint32_t", "uint64_t", "size_t", "float", "double"}


def parse(src: Path):
    """(exported names in ledger order, {name: (return type, [(type, name)])})."""
    api = hpuabi.parse(src)
    protos = {f.name: (f.ret, [(p.ctype, p.name) for p in f.params]) for f in api.functions.values()}
    return [name for name, _, _ in api.ledger], protos


def kind_of(ptype):
    base = ptype.replace("const", "").strip()
    if "*" in base:
        return "pointer", base
    if base in HANDLES:
        return "handle", base
    if base in ENUMS:
        return "enum", base
    if base == "hpuLogCallback_t":
        return "callback", base
    if base in INTS:
        return "number", base
    return "other", base


def plausible(fn, pname, ptype):
    kind, base = kind_of(ptype)
    if pname in DEVICE_MEMORY.get(fn, ()):
        return f"({ptype})fx.dev_mem"
    for f, n, expr in PLAUSIBLE:
        tensor = expr in ("fx.t3", "fx.vec2", "fx.target", "fx.mask", "fx.t12")
        if fnmatch.fnmatchcase(fn, f) and fnmatch.fnmatchcase(pname, n) and (ptype == "hpuTensor_t" or not tensor):
            return expr
    if kind == "pointer" and base.rstrip(" *") in STRUCTS and base.count("*") == 1:
        return f"&{STRUCTS[base.rstrip(' *')]}"
    if kind == "pointer":
        return f"({ptype})scratch()"
    if kind == "handle":
        return f"fx.{HANDLES[base]}"
    if kind == "enum":
        return ENUMS[base]
    if kind == "callback":
        return "quiet_log"
    if base in ("float", "double"):
        return "1.0"
    return "1"


def bad_values(fn, pname, ptype):
    """(expression, description, strict, {other parameter: expression}):
    strict means the call must fail."""
    kind, base = kind_of(ptype)
    if pname in DEVICE_MEMORY.get(fn, ()):
        two = TWO_BYTES.get(fn, {})
        return [("NULL", "NULL", True, {}),
                ("(char *)fx.dev_mem + kDevBytes", "one past the end of an allocation", True, {}),
                ("(char *)fx.dev_mem + kDevBytes - 1", "a range that overruns its allocation", True, two),
                ("fx.freed_mem", "freed memory", True, {}),
                ("fx.closed_mem", "memory of a closed device", True, {}),
                ("fx.other_mem", "another device's memory", fn in COLLECTIVES, {})]
    if base == "int64_t *" and pname == "rows":
        d2d = {"kind": "HPU_MEMCPY_DEVICE_TO_DEVICE", "src": "fx.dev_mem"}
        return [("NULL", "NULL", True, {}), ("fx.rows_huge", "a row of 2^40", True, d2d),
                ("fx.rows_negative", "a row of -1", True, d2d)]
    if base == "int64_t *" and pname in ("shape", "strides") and "const" in ptype:
        bad = [("NULL", "NULL", True, {})]
        if pname == "strides":
            four = {"shape": "fx.shape4"}
            return bad + [("fx.dims_2p61", "a stride of 2^61", True, four),
                          ("fx.dims_max", "a stride of INT64_MAX", True, four),
                          ("fx.dims_min", "a stride of INT64_MIN", True, four)]
        # A wrapped tensor's shape is checked against contiguous strides.
        contiguous = {"strides": "NULL"} if fn == "hpuTensorWrap" else {}
        return bad + [("fx.dims_max", "a dimension of INT64_MAX", True, contiguous),
                      ("fx.dims_negative", "a dimension of -2", True, contiguous),
                      ("fx.dims_2p32", "dimensions whose product overflows", True, {"ndim": "8", **contiguous})]
    if kind == "pointer":
        return [("NULL", "NULL", True, {})]
    if kind == "handle":
        h = HANDLES[base]
        other = "stream" if h != "stream" else "event"
        # A NULL stream means the default stream of the device involved (hpu(7)).
        return [("NULL", "NULL", h != "stream", {}), (f"fx.stale_{h}", "a closed handle", True, {}),
                (f"({base})fx.{other}", "a handle of another kind", True, {})]
    if kind == "enum":
        return [(f"({base})9999", "9999", True, {})]
    if kind == "callback":
        return [("NULL", "NULL", False, {})]
    if base in ("float", "double"):
        return [("NAN", "NaN", False, {}), ("-1e300", "-1e+300", False, {})]
    if base.startswith("u") or base == "size_t":
        return [("(" + base + ")-1", "18446744073709551615" if base in ("size_t", "uint64_t") else "4294967295", False, {})]
    if base == "int64_t":
        return [("-1", "-1", False, {}), ("INT64_MAX", "9223372036854775807", False, {}),
                ("INT64_MIN", "-9223372036854775808", False, {})]
    return [("-1", "-1", False, {}), ("(" + base + ")0x7fffffff", "2147483647", False, {})]


def main():
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    exported, protos = parse(src)
    allow = []
    for line in (src / "tests/badinput/accepted.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            allow.append(tuple(line.split()[:2]))
    body = []
    unknown = [f for f in BASELINE_FAILS if f not in protos]
    if unknown:
        sys.exit("gen.py: BASELINE_FAILS names functions that are not declared: " + ", ".join(unknown))
    missing = [f for f in exported if f not in protos]
    if missing:
        sys.exit("gen.py: exported but not declared in include/hpu: " + ", ".join(missing))
    for fn in exported:
        ret, params = protos[fn]
        if ret != "hpuStatus_t" or not params:
            continue
        cases = []
        if len(params) > 1:
            # With every argument plausible: a bad argument's call that fails the
            # same way as this one failed on another argument first.
            args = [plausible(fn, n, t) for t, n in params]
            expect = "false" if fn in BASELINE_FAILS else "true"
            cases.append(f"  fx.baseline({expect}, {fn}({', '.join(args)}));")
        for i, (ptype, pname) in enumerate(params):
            for expr, desc, strict, others in bad_values(fn, pname, ptype):
                args = [expr if j == i else others.get(n) or plausible(fn, n, t) for j, (t, n) in enumerate(params)]
                documented = desc == "NULL" and any(
                    fnmatch.fnmatchcase(fn, f) and fnmatch.fnmatchcase(pname, p) for f, p in allow)
                rule = "kDocumented" if documented else "kMustFail" if strict else "kMayFail"
                names = " ".join(n for _, n in params)
                cases.append(f'  check(fx, "{fn}", "{pname}", "{desc}", {rule}, "{names}",\n'
                             f'        {fn}({", ".join(args)}));')
        body.append(f"TEST(BadInput, {fn}) {{\n  Fixture fx;\n" + "\n".join(cases) + "\n}\n")
    out.write_text('// Generated by tests/badinput/gen.py from include/hpu/*.h and abi/*.txt. Do not edit.\n'
                   '#include "bad_input.hpp"\n\n' + "\n".join(body))


main()
