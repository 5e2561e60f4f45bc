"""Zero-copy exchange with NumPy, PyTorch and other libraries (DLPack).

:class:`hpu.Tensor` speaks the DLPack protocol (``__dlpack__``,
``__dlpack_device__``), so ``numpy.from_dlpack(t)`` and
``torch.from_dlpack(t)`` see the tensor's memory without a copy, and
:func:`from_dlpack` makes an :class:`hpu.Tensor` over another library's
memory. Writes through either side show in the other.

The emulated devices' memory is host memory: a tensor presents DLPack device
``(kDLCPU, 0)``. A CPU consumer has no stream to order its reads against, so
``__dlpack__`` first waits for the work queued on the tensor's current stream
(see :func:`hpu.stream`); work queued after the export may change the memory
while the consumer reads it. Each side keeps the memory alive for as long as
it holds it, whatever the other releases; a device with memory shared this way
cannot be closed. A capsule that no consumer takes gives its export back at the
next garbage collection, export or import (:func:`sweep`).

libhpu calls an imported tensor's deleter on whichever thread lets go of the
memory last (maybe a device's worker), so :func:`from_dlpack` hands libhpu a
deleter of its own that takes the GIL before it calls the producer's; at exit,
while imports are alive, the binding waits for the devices' queued work, so
that no worker needs the GIL once the interpreter is finalizing.
"""
from __future__ import annotations

import atexit
import ctypes
import gc
import sys
import threading
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import _lib, device as _device
from .device import DeviceLike, resolve
from .errors import InvalidArgumentError, UnsupportedError
from .stream import Stream, stream_for

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["from_dlpack", "sweep", "KDLCPU"]

KDLCPU = 1
# Device types whose memory the CPU addresses: kDLCPU, kDLCUDAHost, kDLROCMHost.
CPU_ADDRESSABLE = (1, 3, 11)


# DLPack's structs (dlpack/dlpack.h; the versioned one is DLPack 1.0's).
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


# Capsule names (the protocol's). PyCapsule_New and PyCapsule_SetName keep the
# pointer, so the names live as long as the module.
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
_USED = {False: b"used_dltensor", True: b"used_dltensor_versioned"}

_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New", _api))
_capsule_name = ctypes.PYFUNCTYPE(c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_capsule_pointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, c_char_p)(("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_char_p)(("PyCapsule_SetName", _api))

# A DLPack deleter: void (*)(DLManagedTensor *). Called through CFUNCTYPE (the GIL
# let go: libhpu's deleters do not touch Python) or PYFUNCTYPE (the GIL kept: a
# Python producer's deleter may, as NumPy's does).
_Deleter = ctypes.CFUNCTYPE(None, c_void_p)
_PyDeleter = ctypes.PYFUNCTYPE(None, c_void_p)

# The capsules of exports. A capsule destructor written in Python would run while
# the capsule is freed, often with an exception pending (a consumer that refused
# it, a frame unwinding), and any Python code there loses that exception; so the
# capsules have none, and sweep() frees the exports whose capsules nobody else
# holds and no consumer took: at the next export or import and after each garbage
# collection.
_exports: List[Any] = []
_exports_lock = threading.Lock()


def _unconsumed_deleter(capsule: Any) -> Optional[Tuple[int, int]]:
    """(managed, its deleter) when no consumer took the capsule (it still has its name)."""
    name = _capsule_name(capsule)
    for versioned, ours in _NAMES.items():
        if name == ours:
            managed = _capsule_pointer(capsule, ours)
            struct = DLManagedTensorVersioned if versioned else DLManagedTensor
            return managed, struct.from_address(managed).deleter
    return None


def sweep(wait: bool = True) -> None:
    """Frees the exports whose capsules only this module still holds: libhpu's deleter for
    one no consumer took (a consumer owns the one it took). wait=False: nothing when another
    sweep holds the list (a collection that runs inside one)."""
    if not _exports_lock.acquire(blocking=wait):
        return
    try:
        live, dead = [], []
        for capsule in _exports:
            # References: _exports, this loop's variable and getrefcount's argument.
            (live if sys.getrefcount(capsule) > 3 else dead).append(capsule)
        _exports[:] = live
    finally:
        _exports_lock.release()
    for capsule in dead:
        unconsumed = _unconsumed_deleter(capsule)
        if unconsumed:
            managed, deleter = unconsumed
            _Deleter(deleter)(managed)


def _after_collection(phase: str, info: Dict[str, int]) -> None:
    if phase == "stop":
        sweep(wait=False)


gc.callbacks.append(_after_collection)


def to_capsule(tensor: "Tensor", stream: Optional[Stream], max_version: Optional[Tuple[int, int]]) -> Any:
    """Tensor.__dlpack__: a capsule holding a new export of `tensor`."""
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"__dlpack__: stream {stream!r} is not None or an hpu.Stream; the tensor is CPU memory "
                        "(kDLCPU), for which DLPack consumers pass None")
    if max_version is not None and not (isinstance(max_version, tuple) and len(max_version) == 2
                                        and all(isinstance(v, int) for v in max_version)):
        raise TypeError(f"__dlpack__: max_version {max_version!r} is not None or a (major, minor) tuple")
    sweep()
    versioned = max_version is not None and max_version[0] >= 1
    handle = stream.handle if stream is not None else stream_for(tensor.device.index)
    managed = c_void_p()
    export = _lib.hpuTensorToDLPackVersioned if versioned else _lib.hpuTensorToDLPack
    export(handle, tensor.handle, ctypes.byref(managed))
    try:
        capsule = _capsule_new(managed, _NAMES[versioned], None)
        with _exports_lock:
            _exports.append(capsule)
    except BaseException:
        struct = DLManagedTensorVersioned if versioned else DLManagedTensor
        _Deleter(struct.from_address(managed.value).deleter)(managed)
        raise
    return capsule


# Imports libhpu holds: the address of the struct handed to libhpu -> (that struct,
# the producer's deleter, the producer's struct, the capsule).
_imports: Dict[int, tuple] = {}


@ctypes.CFUNCTYPE(None, c_void_p)
def _release_import(address: int) -> None:
    """libhpu is done with an import (on any thread; ctypes takes the GIL): tell the producer."""
    _, deleter, managed, _capsule = _imports.pop(address)
    if deleter:
        _PyDeleter(deleter)(managed)


@atexit.register
def _at_exit() -> None:
    """Work queued on an imported tensor holds its memory, and the worker that finishes it last
    calls _release_import, which needs the GIL: a thread other than the main one cannot take it
    once the interpreter is finalizing. So at exit, while it still can, let that work finish.
    The collections of the interpreter's end sweep nothing (the module is going)."""
    gc.callbacks.remove(_after_collection)
    if not _imports:
        return
    for handle in list(_device._handles.values()):
        try:
            _lib.hpuDeviceSynchronize(handle)
        except Exception:  # a sticky error: the work is done all the same
            pass


def _is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def from_dlpack(obj: Any, device: DeviceLike = None) -> "Tensor":
    """A tensor on `device` (None: the current device) over the memory of `obj`, without a
    copy: an object with ``__dlpack__`` (a numpy array, a torch tensor, an hpu.Tensor) or a
    DLPack capsule, which is then consumed (renamed ``used_dltensor``; a capsule is imported
    once). The memory must be CPU-addressable; strides must be >= 0 (a reversed numpy view is
    refused: copy it first); a read-only DLPack 1.0 tensor is refused (libhpu tensors are
    writable). The producer's memory stays alive until the tensor and its views are gone."""
    from .tensor import Tensor

    sweep()
    if _is_capsule(obj):
        capsule = obj
    elif hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            dev = tuple(obj.__dlpack_device__())
            if dev[0] not in CPU_ADDRESSABLE:
                raise UnsupportedError(f"from_dlpack: obj is on DLPack device {dev}; libhpu shares "
                                       "CPU-addressable memory only (kDLCPU, kDLCUDAHost, kDLROCMHost)")
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer of DLPack < 1.0 (NumPy 1.x, PyTorch 1.x)
            capsule = obj.__dlpack__()
    else:
        raise TypeError(f"from_dlpack: obj is a {type(obj).__name__}, neither a DLPack capsule nor an object "
                        "with __dlpack__")
    name = _capsule_name(capsule)
    if name in _USED.values():
        raise InvalidArgumentError(f"from_dlpack: the capsule is named {name.decode()!r}: it was already "
                                   "consumed, and a DLPack capsule can be imported once")
    if name not in _NAMES.values():
        raise InvalidArgumentError(f"from_dlpack: the capsule is named {name.decode()!r}, not 'dltensor' or "
                                   "'dltensor_versioned'")
    versioned = name == _NAMES[True]
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    managed = _capsule_pointer(capsule, name)
    ours = struct.from_buffer_copy(struct.from_address(managed))
    ours.manager_ctx = None
    ours.deleter = ctypes.cast(_release_import, c_void_p).value
    address = ctypes.addressof(ours)
    _imports[address] = (ours, struct.from_address(managed).deleter, managed, capsule)
    out = _lib.Handle()
    take = _lib.hpuTensorFromDLPackVersioned if versioned else _lib.hpuTensorFromDLPack
    try:
        take(ctypes.byref(out), resolve(device).handle, address)
    except BaseException:
        del _imports[address]  # refused: the capsule stays the producer's
        raise
    _capsule_set_name(capsule, _USED[versioned])
    return Tensor(out.value)
