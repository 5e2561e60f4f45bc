"""Streams (in-order queues run by a device's workers) and events (markers on them)."""
from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from . import _lib
from .device import Device, DeviceLike, resolve
from .errors import NotReadyError

__all__ = ["Stream", "Event", "stream", "current_stream", "default_stream"]


class Stream:
    """A stream of a device: ``Stream()`` creates one on the current device.

    Work queued on one stream runs in order, asynchronously to the caller.
    A stream is destroyed by :meth:`close` or when it is garbage collected;
    the default stream of a device is never destroyed.
    """

    def __init__(self, device: DeviceLike = None) -> None:
        self.device: Device = resolve(device)
        out = _lib.Handle()
        _lib.hpuStreamCreate(ctypes.byref(out), self.device.handle)
        self._handle: int = out.value
        self._owned = True  # destroyed by close(); False for default streams

    @classmethod
    def _wrap(cls, handle: int, device: Device) -> "Stream":
        s = cls.__new__(cls)
        s.device, s._handle, s._owned = device, handle, False
        return s

    @property
    def handle(self) -> int:
        """The ``hpuStream_t`` handle, for calling the C API directly (stale once closed)."""
        return self._handle

    def synchronize(self) -> None:
        """Waits until all work queued so far has run; raises the stream's sticky error."""
        _lib.hpuStreamSynchronize(self._handle)

    def query(self) -> bool:
        """True when all queued work has completed, False while some is pending."""
        try:
            _lib.hpuStreamQuery(self._handle)
            return True
        except NotReadyError:
            return False

    def wait_event(self, event: "Event") -> None:
        """Work queued on this stream from now on waits for `event`'s latest record."""
        _lib.hpuStreamWaitEvent(self._handle, event.handle)

    def wait_stream(self, other: "Stream") -> None:
        """Work queued on this stream from now on waits for the work queued on `other` so far."""
        self.wait_event(other.record_event())

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        """Records `event` (a new one by default) on this stream and returns it."""
        event = event if event is not None else Event()
        event.record(self)
        return event

    def close(self) -> None:
        """Destroys the stream (after its queued work); the default stream is left alone."""
        if self._owned:
            self._owned = False
            _lib.hpuStreamDestroy(self._handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        return f"<hpu.Stream of hpu:{self.device.index} at {self._handle:#x}>"


class Event:
    """A marker recorded on a stream, for ordering and timing::

        start, end = hpu.Event(), hpu.Event()
        start.record(); ...; end.record(); end.synchronize()
        ms = start.elapsed_time(end)
    """

    def __init__(self) -> None:
        out = _lib.Handle()
        _lib.hpuEventCreate(ctypes.byref(out))
        self._handle: int = out.value
        self._live = True

    @property
    def handle(self) -> int:
        """The ``hpuEvent_t`` handle, for calling the C API directly (stale once closed)."""
        return self._handle

    def record(self, stream: Optional[Stream] = None) -> None:
        """Records the event on `stream` (this thread's current stream by default)."""
        _lib.hpuEventRecord((stream or current_stream()).handle, self._handle)

    def synchronize(self) -> None:
        """Waits until the work before the latest record has run."""
        _lib.hpuEventSynchronize(self._handle)

    def query(self) -> bool:
        """True when the latest record has completed, False while pending."""
        try:
            _lib.hpuEventQuery(self._handle)
            return True
        except NotReadyError:
            return False

    def wait(self, stream: Optional[Stream] = None) -> None:
        """Makes `stream` (the current one by default) wait for this event."""
        (stream or current_stream()).wait_event(self)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds between the completion of this event and of `end`."""
        ms = ctypes.c_float()
        _lib.hpuEventElapsedTime(self._handle, end.handle, ctypes.byref(ms))
        return ms.value

    def close(self) -> None:
        """Destroys the event."""
        if self._live:
            self._live = False
            _lib.hpuEventDestroy(self._handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<hpu.Event at {self._handle:#x}>"


_local = threading.local()


def default_stream(device: DeviceLike = None) -> Stream:
    """The default stream of `device` (the current one by default)."""
    dev = resolve(device)
    out = _lib.Handle()
    _lib.hpuDeviceGetDefaultStream(dev.handle, ctypes.byref(out))
    return Stream._wrap(out.value, dev)


def current_stream(device: DeviceLike = None) -> Stream:
    """This thread's current stream of `device`: the one set by :func:`stream`, else its default stream."""
    dev = resolve(device)
    chosen = getattr(_local, "streams", {}).get(dev.index)
    return chosen[-1] if chosen else default_stream(dev)


def stream_for(device_index: int) -> Optional[int]:
    """The handle of the stream this thread chose for a device with :func:`stream`, or None
    (NULL: libhpu uses the device's default stream)."""
    chosen = getattr(_local, "streams", {}).get(device_index)
    return chosen[-1].handle if chosen else None


@contextmanager
def stream(s: Optional[Stream]) -> Iterator[Optional[Stream]]:
    """Makes `s` the current stream of its device in this thread for the block (None: no change)."""
    if s is None:
        yield s
        return
    streams = _local.__dict__.setdefault("streams", {})
    streams.setdefault(s.device.index, []).append(s)
    try:
        with s.device:
            yield s
    finally:
        streams[s.device.index].pop()
