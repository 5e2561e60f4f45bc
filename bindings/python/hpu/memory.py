"""Device memory: Habana's memory statistics and raw allocations.

The statistics functions are those of ``torch.hpu`` (``habana_frameworks``),
with Habana's semantics: :func:`reset_peak_memory_stats` sets MaxInUse to 0,
:func:`reset_accumulated_memory_stats` zeroes NumAllocs, NumFrees and
MaxAllocSize and sets MaxInUse to InUse.
"""
from __future__ import annotations

import ctypes
from typing import Dict, Optional, Sequence, Tuple

from . import _abi, _lib
from ._buffer import host_buffer
from .device import Device, DeviceLike, resolve
from .errors import InvalidArgumentError, InvalidHandleError
from .stream import Stream

__all__ = ["HABANA_STATS_KEYS", "ALLOCATOR_STATS_KEYS", "memory_stats", "memory_allocated",
           "max_memory_allocated", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
           "mem_get_info", "empty_cache", "DeviceMemory", "mem_alloc"]

#: Habana's ten keys of ``torch.hpu.memory_stats()``, in Habana's order.
HABANA_STATS_KEYS = ("Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs",
                     "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs")
#: The three figures libhpu's caching allocator adds after them.
ALLOCATOR_STATS_KEYS = ("ReservedBytes", "SegmentAllocs", "SegmentFrees")

_FIELDS = ("limit", "in_use", "max_in_use", "num_allocs", "num_frees", "active_allocs",
           "max_alloc_size", "total_system_allocs", "total_system_frees", "total_active_allocs",
           "reserved_bytes", "segment_allocs", "segment_frees")


def _stats(device: DeviceLike) -> "_abi.hpuMemStats_t":
    s = _lib.sized(_abi.hpuMemStats_t)
    _lib.hpuMemStats(resolve(device).handle, ctypes.byref(s))
    return s


def memory_stats(device: DeviceLike = None) -> Dict[str, int]:
    """The device's memory figures as a dict, in this order:

    Habana's ten keys (:data:`HABANA_STATS_KEYS`: Limit, InUse, MaxInUse,
    NumAllocs, NumFrees, ActiveAllocs, MaxAllocSize, TotalSystemAllocs,
    TotalSystemFrees, TotalActiveAllocs), then the allocator's three
    (:data:`ALLOCATOR_STATS_KEYS`: ReservedBytes, SegmentAllocs, SegmentFrees).
    Sizes are bytes, rounded up to 512 as the allocator counts them.
    """
    s = _stats(device)
    return {key: getattr(s, field) for key, field in zip(HABANA_STATS_KEYS + ALLOCATOR_STATS_KEYS, _FIELDS)}


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes held by live allocations now (InUse)."""
    return _stats(device).in_use


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of InUse since the last reset (MaxInUse)."""
    return _stats(device).max_in_use


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Sets MaxInUse to 0, as Habana does (not to InUse, as CUDA does)."""
    _lib.hpuMemResetPeakStats(resolve(device).handle)


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Zeroes NumAllocs, NumFrees and MaxAllocSize and sets MaxInUse to InUse."""
    _lib.hpuMemResetAccumulatedStats(resolve(device).handle)


def mem_get_info(device: DeviceLike = None) -> Tuple[int, int]:
    """(free, total) bytes: (Limit - InUse, Limit)."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _lib.hpuMemGetInfo(resolve(device).handle, ctypes.byref(free), ctypes.byref(total))
    return free.value, total.value


def empty_cache(device: DeviceLike = None) -> None:
    """Gives the allocator's cached, unused segments back to the system."""
    _lib.hpuMemEmptyCache(resolve(device).handle)


class DeviceMemory:
    """A block of device memory (``hpuMemAlloc``), freed by :meth:`free`, at the end of a
    ``with`` block, or when garbage collected.

    Host data goes in and out through anything with the buffer protocol
    (bytes, bytearray, array.array, numpy arrays); host copies are synchronous.
    """

    def __init__(self, nbytes: int, device: DeviceLike = None) -> None:
        if not isinstance(nbytes, int) or nbytes < 0:
            raise InvalidArgumentError(f"nbytes {nbytes!r} is not a non-negative int")
        self.device: Device = resolve(device)
        out = ctypes.c_void_p()
        _lib.hpuMemAlloc(ctypes.byref(out), self.device.handle, nbytes)
        self.nbytes: int = nbytes
        self._ptr: Optional[int] = out.value or 0

    @property
    def ptr(self) -> int:
        """The device address (raises once freed)."""
        if self._ptr is None:
            raise InvalidHandleError(f"this DeviceMemory of {self.nbytes} bytes on hpu:{self.device.index} "
                                     "was freed")
        return self._ptr

    def __int__(self) -> int:
        return self.ptr

    def __len__(self) -> int:
        return self.nbytes

    def _range(self, offset: int, nbytes: int, what: str) -> int:
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise InvalidArgumentError(f"{what}: {nbytes} bytes at offset {offset} do not fit in "
                                       f"{self.nbytes} bytes of device memory")
        return self.ptr + offset

    def copy_from_host(self, src: object, offset: int = 0) -> None:
        """Copies the bytes of `src` (any buffer) to this memory at `offset`."""
        with host_buffer(src, name="src") as (addr, n):
            dst = self._range(offset, n, "copy_from_host")
            if n:
                _lib.hpuMemcpy(dst, addr, n, _abi.HPU_MEMCPY_HOST_TO_DEVICE)

    def copy_rows_from_host(self, src: object, row_bytes: int, rows: Sequence[int], offset: int = 0) -> None:
        """Gathers rows of `src` (any buffer, read as rows of `row_bytes` bytes) into this memory
        at `offset`, one after another: row i here is row ``rows[i]`` of `src`
        (``hpuMemcpyRowsAsync``, waited for like the other host copies)."""
        if not isinstance(row_bytes, int) or row_bytes < 0:
            raise InvalidArgumentError(f"row_bytes {row_bytes!r} is not a non-negative int")
        rows = list(rows)
        with host_buffer(src, name="src") as (addr, n):
            held = n // row_bytes if row_bytes else 0
            for i, r in enumerate(rows):
                if not isinstance(r, int) or not 0 <= r < held:
                    raise InvalidArgumentError(f"rows[{i}] is {r!r}; src holds {held} rows of {row_bytes} bytes")
            dst = self._range(offset, len(rows) * row_bytes, "copy_rows_from_host")
            if rows and row_bytes:
                _lib.hpuMemcpyRowsAsync(None, dst, addr, row_bytes, (ctypes.c_int64 * len(rows))(*rows), len(rows),
                                        _abi.HPU_MEMCPY_HOST_TO_DEVICE)
                self.device.synchronize()

    def copy_to_host(self, dst: object = None, offset: int = 0) -> object:
        """Copies device bytes from `offset` into `dst` (a writable buffer; all of it is filled)
        and returns it; without `dst`, returns a new bytearray of the rest of the memory."""
        if dst is None:
            dst = bytearray(self.nbytes - offset if 0 <= offset <= self.nbytes else 0)
        with host_buffer(dst, writable=True, name="dst") as (addr, n):
            src = self._range(offset, n, "copy_to_host")
            if n:
                _lib.hpuMemcpy(addr, src, n, _abi.HPU_MEMCPY_DEVICE_TO_HOST)
        return dst

    def copy_from(self, src: "DeviceMemory", nbytes: Optional[int] = None, offset: int = 0,
                  src_offset: int = 0, stream: Optional[Stream] = None) -> None:
        """Device-to-device copy of `nbytes` (all of `src` from `src_offset` by default);
        queued on `stream` when given, otherwise synchronous."""
        if nbytes is None:
            nbytes = src.nbytes - src_offset
        s = src._range(src_offset, nbytes, "copy_from (source)")
        d = self._range(offset, nbytes, "copy_from (destination)")
        if nbytes == 0:
            return
        if stream is None:
            _lib.hpuMemcpy(d, s, nbytes, _abi.HPU_MEMCPY_DEVICE_TO_DEVICE)
        else:
            _lib.hpuMemcpyAsync(stream.handle, d, s, nbytes, _abi.HPU_MEMCPY_DEVICE_TO_DEVICE)

    def fill(self, value: int, nbytes: Optional[int] = None, offset: int = 0,
             stream: Optional[Stream] = None) -> None:
        """Sets `nbytes` (the rest by default) from `offset` to the byte `value` (0..255);
        queued on `stream` when given, otherwise synchronous."""
        if nbytes is None:
            nbytes = self.nbytes - offset
        d = self._range(offset, nbytes, "fill")
        if nbytes == 0:
            return
        if stream is None:
            _lib.hpuMemset(d, value, nbytes)
        else:
            _lib.hpuMemsetAsync(stream.handle, d, value, nbytes)

    def free(self) -> None:
        """Returns the memory to the device's allocator (after work queued on it). Idempotent."""
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            _lib.hpuMemFree(ptr or None)

    def __enter__(self) -> "DeviceMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        where = f"at {self._ptr:#x}" if self._ptr is not None else "(freed)"
        return f"<hpu.DeviceMemory {self.nbytes} bytes on hpu:{self.device.index} {where}>"


def mem_alloc(nbytes: int, device: DeviceLike = None) -> DeviceMemory:
    """Allocates `nbytes` of memory on `device` (the current one by default)."""
    return DeviceMemory(nbytes, device)
