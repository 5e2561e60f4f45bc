"""Finds libhpu, loads it with ctypes and declares the C functions.

The library is looked for, in order:

1. the file named by ``HPU_LIBRARY`` (when set, nothing else is tried);
2. ``libhpu.so.0`` next to the package (a copy bundled with it);
3. the location written into ``_location.py`` by the build tree or by
   ``cmake --install``;
4. ``libhpu.so.0`` on the system library path (``LD_LIBRARY_PATH``, ``ldconfig``).

libhpu-trainer (for :func:`hpu.train`) is looked for the same way when first
needed: ``HPU_TRAINER_LIBRARY``, next to the package, ``_location.py``, then
next to the libhpu that was loaded, then ``libhpu-trainer.so.0`` on the system
library path.

Every function that returns ``hpuStatus_t`` raises the matching
:class:`~hpu.errors.HpuError` on failure, so callers just call it.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char, c_char_p, c_float, c_int, c_int64, c_size_t, c_uint64, c_void_p

from .errors import error_for

ABI_MAJOR = 0
SONAME = f"libhpu.so.{ABI_MAJOR}"

# Opaque handles (hpuDevice_t, hpuStream_t, ...) and device pointers.
Handle = c_void_p


class DeviceProperties_t(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char * 64), ("profile", c_char * 16),
                ("total_memory", c_uint64), ("memory_limit", c_uint64), ("ordinal", c_int),
                ("module_id", c_int)]


class MemStats_t(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("limit", c_uint64), ("in_use", c_uint64),
                ("max_in_use", c_uint64), ("num_allocs", c_uint64), ("num_frees", c_uint64),
                ("active_allocs", c_int64), ("max_alloc_size", c_uint64),
                ("total_system_allocs", c_uint64), ("total_system_frees", c_uint64),
                ("total_active_allocs", c_int64), ("reserved_bytes", c_uint64),
                ("segment_allocs", c_uint64), ("segment_frees", c_uint64)]


def sized(struct_type: type) -> ctypes.Structure:
    """A struct with struct_size set, as the C _INIT macros do."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    return s


Status = object()  # marks functions returning hpuStatus_t (declared as c_int)

# name: (restype, argtypes). Functions returning Status raise on failure.
PROTOTYPES = {
    # status.h
    "hpuGetErrorName": (c_char_p, [c_int]),
    "hpuGetErrorString": (c_char_p, [c_int]),
    "hpuGetLastErrorMessage": (c_char_p, []),
    "hpuGetVersion": (c_int, []),
    "hpuFree": (None, [c_void_p]),
    # device.h
    "hpuDeviceCount": (Status, [POINTER(c_int)]),
    "hpuDeviceOpen": (Status, [POINTER(Handle), c_int]),
    "hpuDeviceClose": (Status, [Handle]),
    "hpuDeviceGetProperties": (Status, [Handle, POINTER(DeviceProperties_t)]),
    "hpuDeviceSynchronize": (Status, [Handle]),
    "hpuDeviceGetDefaultStream": (Status, [Handle, POINTER(Handle)]),
    "hpuStreamCreate": (Status, [POINTER(Handle), Handle]),
    "hpuStreamDestroy": (Status, [Handle]),
    "hpuStreamSynchronize": (Status, [Handle]),
    "hpuStreamQuery": (Status, [Handle]),
    "hpuStreamWaitEvent": (Status, [Handle, Handle]),
    "hpuEventCreate": (Status, [POINTER(Handle)]),
    "hpuEventDestroy": (Status, [Handle]),
    "hpuEventRecord": (Status, [Handle, Handle]),
    "hpuEventSynchronize": (Status, [Handle]),
    "hpuEventQuery": (Status, [Handle]),
    "hpuEventElapsedTime": (Status, [Handle, Handle, POINTER(c_float)]),
    # memory.h
    "hpuMemAlloc": (Status, [POINTER(c_void_p), Handle, c_size_t]),
    "hpuMemFree": (Status, [c_void_p]),
    "hpuMemcpy": (Status, [c_void_p, c_void_p, c_size_t, c_int]),
    "hpuMemcpyAsync": (Status, [Handle, c_void_p, c_void_p, c_size_t, c_int]),
    "hpuMemcpyRowsAsync": (Status, [Handle, c_void_p, c_void_p, c_size_t, POINTER(c_int64), c_size_t, c_int]),
    "hpuMemset": (Status, [c_void_p, c_int, c_size_t]),
    "hpuMemsetAsync": (Status, [Handle, c_void_p, c_int, c_size_t]),
    "hpuMemGetInfo": (Status, [Handle, POINTER(c_size_t), POINTER(c_size_t)]),
    "hpuMemEmptyCache": (Status, [Handle]),
    "hpuMemStats": (Status, [Handle, POINTER(MemStats_t)]),
    "hpuMemStatsJson": (Status, [Handle, POINTER(c_void_p)]),
    "hpuMemResetPeakStats": (Status, [Handle]),
    "hpuMemResetAccumulatedStats": (Status, [Handle]),
    # log.h
    "hpuSetLogLevel": (Status, [c_int]),
    "hpuGetLogLevel": (Status, [POINTER(c_int)]),
    # profiler.h
    "hpuProfilerStart": (Status, [c_char_p]),
    "hpuProfilerStop": (Status, []),
    "hpuProfilerGetSummary": (Status, [POINTER(c_void_p)]),
    # autocast.h
    "hpuAutocastPush": (Status, [c_int, c_int]),
    "hpuAutocastPop": (Status, []),
    "hpuAutocastGetState": (Status, [POINTER(c_int), POINTER(c_int)]),
    "hpuAutocastSetOpList": (Status, [c_int, POINTER(c_char_p), c_size_t]),
    "hpuAutocastGetOpList": (Status, [c_int, POINTER(c_void_p)]),
    "hpuAutocastGetOpDtype": (Status, [c_char_p, POINTER(c_int), c_size_t, POINTER(c_int)]),
}

HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 1, 2, 3  # hpuMemcpyKind_t


def find(soname: str, override: str, location: str, beside: str = "") -> tuple[ctypes.CDLL, str]:
    """Loads `soname`: from the file the variable `override` names (when set, nothing else
    is tried), next to the package, where _location.py's `location` says, in the folder
    of `beside` (the libhpu already loaded), then from the system library path."""
    explicit = os.environ.get(override)
    if explicit:
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise ImportError(f"hpu: cannot load {override}={explicit!r}: {e}") from None
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, soname)]
    try:
        from . import _location  # written by the build tree or cmake --install
        candidates.append(os.path.normpath(os.path.join(here, getattr(_location, location))))
    except (ImportError, AttributeError):
        pass
    if os.path.dirname(beside):
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(beside)), soname))
    tried = []
    for path in candidates:
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                tried.append(f"{path}: {e}")
        else:
            tried.append(f"{path}: no such file")
    try:
        return ctypes.CDLL(soname), soname
    except OSError as e:
        tried.append(f"{soname} on the system library path: {e}")
    name = soname.split(".so")[0]
    raise ImportError(f"hpu: cannot find {name}; set {override} to its path. Tried:\n  " + "\n  ".join(tried))


lib, path = find(SONAME, "HPU_LIBRARY", "LIBRARY")


def last_error_message() -> str:
    """hpuGetLastErrorMessage() as text."""
    return lib.hpuGetLastErrorMessage().decode("utf-8", "replace")


def _check(status: int, func, args):
    if status != 0:
        raise error_for(status, last_error_message())
    return status


def _missing(name: str):
    def call(*args):
        raise error_for(7, f"{name}: this libhpu ({path}) does not export it; it is older than the binding")
    return call


def _declare(prototypes: dict) -> None:
    for name, (restype, argtypes) in prototypes.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            globals()[name] = _missing(name)
            continue
        fn.argtypes = argtypes
        if restype is Status:
            fn.restype, fn.errcheck = c_int, _check
        else:
            fn.restype = restype
        globals()[name] = fn


_declare(PROTOTYPES)

version_number = lib.hpuGetVersion()
if version_number >> 16 != ABI_MAJOR:
    raise ImportError(f"hpu: {path} is libhpu {version_number >> 16}.x; this binding needs {ABI_MAJOR}.x")
