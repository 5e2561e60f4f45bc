"""Statuses and the exceptions that carry them.

Every failing libhpu call raises an :class:`HpuError`: the subclass says which
status the library returned, ``status_name`` is its C name and ``message`` the
detail from ``hpuGetLastErrorMessage()`` (the function, the argument and its
value). Checks the binding makes before a call raise the same classes.
"""
from __future__ import annotations

import builtins
import enum

__all__ = [
    "Status", "HpuError", "InvalidArgumentError", "InvalidHandleError", "OutOfMemoryError",
    "NotFoundError", "BusyError", "NotReadyError", "UnsupportedError", "ConfigError", "IoError",
    "NotAvailableError", "InvalidUsageError", "RemoteError", "TimeoutError", "AbortedError",
    "AddressInUseError", "InternalError",
]


class Status(enum.IntEnum):
    """libhpu's statuses (``hpuStatus_t``); the numbers are fixed forever."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    OUT_OF_MEMORY = 3
    NOT_FOUND = 4
    BUSY = 5
    NOT_READY = 6
    UNSUPPORTED = 7
    CONFIG = 8
    IO = 9
    NOT_AVAILABLE = 10
    INVALID_USAGE = 11
    REMOTE = 12
    TIMEOUT = 13
    ABORTED = 14
    ADDRESS_IN_USE = 15
    INTERNAL = 99

    @property
    def c_name(self) -> str:
        """The name ``hpuGetErrorName`` gives, e.g. ``"HPU_ERROR_NOT_FOUND"``."""
        return "HPU_SUCCESS" if self is Status.SUCCESS else "HPU_ERROR_" + self.name


class HpuError(RuntimeError):
    """A libhpu call failed. Subclasses name the status.

    Attributes:
        status: the status number (a :class:`Status` when libhpu knows it).
        status_name: its C name, e.g. ``"HPU_ERROR_OUT_OF_MEMORY"``.
        message: the detail, e.g. ``"hpuMemAlloc: 2147483648 bytes requested, ..."``.
    """

    status: int = Status.INTERNAL

    def __init__(self, message: str, status: int | None = None) -> None:
        if status is not None:
            try:
                self.status = Status(status)
            except ValueError:
                self.status = status
        self.message = message
        super().__init__(f"{self.status_name}: {message}")

    @property
    def status_name(self) -> str:
        """The C name of the status, ``"HPU_STATUS_UNKNOWN"`` for a number libhpu does not define."""
        return self.status.c_name if isinstance(self.status, Status) else "HPU_STATUS_UNKNOWN"


class InvalidArgumentError(HpuError, ValueError):
    """NULL, out of range, bad shape or dtype (HPU_ERROR_INVALID_ARGUMENT)."""
    status = Status.INVALID_ARGUMENT


class InvalidHandleError(HpuError):
    """A closed, foreign or wrong-kind handle or device pointer (HPU_ERROR_INVALID_HANDLE)."""
    status = Status.INVALID_HANDLE


class OutOfMemoryError(HpuError):
    """Device capacity or host memory exhausted (HPU_ERROR_OUT_OF_MEMORY)."""
    status = Status.OUT_OF_MEMORY


class NotFoundError(HpuError, LookupError):
    """No such device, file or name (HPU_ERROR_NOT_FOUND)."""
    status = Status.NOT_FOUND


class BusyError(HpuError):
    """The object still has live children (HPU_ERROR_BUSY)."""
    status = Status.BUSY


class NotReadyError(HpuError):
    """A query found work still pending (HPU_ERROR_NOT_READY)."""
    status = Status.NOT_READY


class UnsupportedError(HpuError):
    """A valid request this build or dtype cannot do (HPU_ERROR_UNSUPPORTED)."""
    status = Status.UNSUPPORTED


class ConfigError(HpuError):
    """A bad environment variable, config file or op-list file (HPU_ERROR_CONFIG)."""
    status = Status.CONFIG


class IoError(HpuError):
    """A system call or file operation failed (HPU_ERROR_IO)."""
    status = Status.IO


class NotAvailableError(HpuError):
    """A transport or hardware is absent (HPU_ERROR_NOT_AVAILABLE)."""
    status = Status.NOT_AVAILABLE


class InvalidUsageError(HpuError):
    """Calls in the wrong order, mismatched collectives (HPU_ERROR_INVALID_USAGE)."""
    status = Status.INVALID_USAGE


class RemoteError(HpuError):
    """A peer failed or closed (HPU_ERROR_REMOTE)."""
    status = Status.REMOTE


class TimeoutError(HpuError, builtins.TimeoutError):
    """A deadline passed (HPU_ERROR_TIMEOUT); also a builtin TimeoutError."""
    status = Status.TIMEOUT


class AbortedError(HpuError):
    """The communicator was aborted (HPU_ERROR_ABORTED)."""
    status = Status.ABORTED


class AddressInUseError(HpuError):
    """A port is taken (HPU_ERROR_ADDRESS_IN_USE)."""
    status = Status.ADDRESS_IN_USE


class InternalError(HpuError):
    """A bug in libhpu (HPU_ERROR_INTERNAL)."""
    status = Status.INTERNAL


_CLASSES = {cls.status: cls for cls in (
    InvalidArgumentError, InvalidHandleError, OutOfMemoryError, NotFoundError, BusyError,
    NotReadyError, UnsupportedError, ConfigError, IoError, NotAvailableError, InvalidUsageError,
    RemoteError, TimeoutError, AbortedError, AddressInUseError, InternalError)}


def error_for(status: int, message: str) -> HpuError:
    """The exception for a failed status: its subclass, or HpuError for an unknown number."""
    cls = _CLASSES.get(status)
    return cls(message) if cls else HpuError(message, status)

for _cls in (HpuError, *_CLASSES.values()):
    _cls.__module__ = "hpu"  # their public home: hpu.NotFoundError, ...
