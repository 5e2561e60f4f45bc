"""Devices: count, selection, properties, synchronisation.

As with ``torch.hpu``, a device is opened on first use and stays open for the
life of the process; :class:`Device` used as a context manager makes it the
current device of the calling thread, the one every ``device=None`` argument
means.
"""
from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple, Union

from . import _abi, _lib
from .errors import InvalidArgumentError

__all__ = ["Device", "DeviceProperties", "DeviceLike", "device_count", "is_available",
           "current_device", "set_device", "get_device_name", "get_device_properties", "synchronize"]


class DeviceProperties(NamedTuple):
    """What ``hpuDeviceGetProperties`` reports about a device."""

    name: str          #: "HPU 0 (gaudi2, emulated)"
    profile: str       #: "gaudi", "gaudi2" or "gaudi3"
    total_memory: int  #: capacity in bytes
    memory_limit: int  #: usable bytes: total_memory x HPU_MEMORY_FRACTION (the Limit statistic)
    ordinal: int       #: index among visible devices
    module_id: int     #: index among all emulated devices
    kernel_isa: str    #: the instruction set the kernels use: "amx", "avx512", "avx2" or "scalar"


_handles: dict = {}
_handles_lock = threading.Lock()
_local = threading.local()


def _handle(index: int) -> int:
    """The process's open handle of device `index`, opened on first use."""
    h = _handles.get(index)
    if h is None:
        with _handles_lock:
            h = _handles.get(index)
            if h is None:
                out = _lib.Handle()
                _lib.hpuDeviceOpen(ctypes.byref(out), index)
                h = _handles[index] = out.value
    return h


def device_of_handle(handle: int) -> "Device":
    """The Device whose open handle is `handle` (every handle the binding sees was opened by it)."""
    for index, h in list(_handles.items()):
        if h == handle:
            return Device(index)
    raise InvalidArgumentError(f"device handle {handle:#x} was not opened by this binding")


def _index(device: "DeviceLike") -> int:
    if device is None:
        return current_device()
    if isinstance(device, Device):
        return device.index
    if isinstance(device, str):
        kind, _, num = device.partition(":")
        if kind == "hpu" and (num == "" or num.isdigit()):
            return int(num) if num else current_device()
        raise InvalidArgumentError(f"device {device!r} is not 'hpu' or 'hpu:<index>'")
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise TypeError(f"device must be an int, 'hpu:<index>', an hpu.Device or None, not {type(device).__name__}")


class Device:
    """An emulated HPU device.

    ``Device(i)`` opens device ``i`` (raising :class:`~hpu.NotFoundError` when
    it does not exist); ``Device()`` is the current device. Used as a context
    manager it becomes the current device of this thread until the block ends::

        with hpu.Device(1):
            hpu.memory_stats()          # device 1's figures
    """

    __slots__ = ("index", "_handle")

    def __init__(self, index: "DeviceLike" = None) -> None:
        self.index: int = _index(index)
        self._handle: int = _handle(self.index)

    @property
    def handle(self) -> int:
        """The ``hpuDevice_t`` handle, for calling the C API directly."""
        return self._handle

    @property
    def properties(self) -> DeviceProperties:
        """The device's :class:`DeviceProperties`."""
        p = _lib.sized(_abi.hpuDeviceProperties_t)
        _lib.hpuDeviceGetProperties(self._handle, ctypes.byref(p))
        return DeviceProperties(p.name.decode(), p.profile.decode(), p.total_memory, p.memory_limit,
                                p.ordinal, p.module_id, p.kernel_isa.decode())

    @property
    def name(self) -> str:
        """The device's name, e.g. ``"HPU 0 (gaudi2, emulated)"``."""
        return self.properties.name

    def synchronize(self) -> None:
        """Waits for all work queued on every stream of the device."""
        _lib.hpuDeviceSynchronize(self._handle)

    def __enter__(self) -> "Device":
        stack = _stack()
        stack.append(self.index)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack().pop()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("hpu", self.index))

    def __repr__(self) -> str:
        return f"hpu.Device({self.index})"

    def __str__(self) -> str:
        return f"hpu:{self.index}"


DeviceLike = Union[Device, int, str, None]
"""A device argument: an index, ``"hpu"``/``"hpu:<index>"``, a :class:`Device`, or None (the current one)."""


def _stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = [0]
    return stack


def device_count() -> int:
    """Number of visible emulated devices (``HPU_NUM_DEVICES``, ``HPU_VISIBLE_DEVICES``)."""
    n = ctypes.c_int()
    _lib.hpuDeviceCount(ctypes.byref(n))
    return n.value


def is_available() -> bool:
    """True when at least one device is visible; never raises."""
    try:
        return device_count() > 0
    except Exception:
        return False


def current_device() -> int:
    """Index of this thread's current device (0 unless set)."""
    return _stack()[-1]


def set_device(device: DeviceLike) -> None:
    """Makes `device` the current device of this thread (opening it, so a bad index raises here)."""
    _stack()[-1] = Device(device).index


def get_device_name(device: DeviceLike = None) -> str:
    """The name of `device` (the current one by default)."""
    return Device(device).name


def get_device_properties(device: DeviceLike = None) -> DeviceProperties:
    """The :class:`DeviceProperties` of `device` (the current one by default)."""
    return Device(device).properties


def synchronize(device: DeviceLike = None) -> None:
    """Waits for all work queued on `device` (the current one by default)."""
    Device(device).synchronize()


def resolve(device: DeviceLike) -> Device:
    """`device` as a :class:`Device` (for the binding's other modules)."""
    return device if isinstance(device, Device) else Device(device)
