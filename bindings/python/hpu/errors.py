"""Statuses and the exceptions that carry them.

Every failing libhpu call raises an :class:`HpuError`: the subclass says which
status the library returned, ``status_name`` is its C name and ``message`` the
detail from ``hpuGetLastErrorMessage()`` (the function, the argument and its
value). Checks the binding makes before a call raise the same classes.
"""
from __future__ import annotations

import builtins

from ._abi import Status

__all__ = [
    "Status", "HpuError", "InvalidArgumentError", "InvalidHandleError", "OutOfMemoryError",
    "NotFoundError", "BusyError", "NotReadyError", "UnsupportedError", "ConfigError", "IoError",
    "NotAvailableError", "InvalidUsageError", "RemoteError", "TimeoutError", "AbortedError",
    "AddressInUseError", "InternalError",
]


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


# The subclass of each status of the generated Status (HPU_STATUS_MAP): (status,
# when it happens, builtin bases). One line each, so that readers and type
# checkers see every name; _subclass makes the class, named after the status
# (OUT_OF_MEMORY -> OutOfMemoryError). test_errors checks that every status
# but SUCCESS has one.
_CLASSES: dict[int, type[HpuError]] = {}


def _subclass(status: Status, when: str, *builtin_bases: type) -> type[HpuError]:
    name = "".join(word.capitalize() for word in status.name.split("_")) + "Error"
    also = "".join(f"; also a builtin {base.__name__}" for base in builtin_bases)
    cls = type(name, (HpuError, *builtin_bases), {
        "__doc__": f"{when} ({status.c_name}){also}.", "__module__": "hpu", "__qualname__": name, "status": status})
    _CLASSES[status] = cls
    return cls


InvalidArgumentError = _subclass(Status.INVALID_ARGUMENT, "NULL, out of range, bad shape or dtype", ValueError)
InvalidHandleError = _subclass(Status.INVALID_HANDLE, "A closed, foreign or wrong-kind handle or device pointer")
OutOfMemoryError = _subclass(Status.OUT_OF_MEMORY, "Device capacity or host memory exhausted")
NotFoundError = _subclass(Status.NOT_FOUND, "No such device, file or name", LookupError)
BusyError = _subclass(Status.BUSY, "The object still has live children")
NotReadyError = _subclass(Status.NOT_READY, "A query found work still pending")
UnsupportedError = _subclass(Status.UNSUPPORTED, "A valid request this build or dtype cannot do")
ConfigError = _subclass(Status.CONFIG, "A bad environment variable, config file, op-list file or job")
IoError = _subclass(Status.IO, "A system call or file operation failed")
NotAvailableError = _subclass(Status.NOT_AVAILABLE, "A transport or hardware is absent")
InvalidUsageError = _subclass(Status.INVALID_USAGE, "Calls in the wrong order, mismatched collectives")
RemoteError = _subclass(Status.REMOTE, "A peer failed or closed")
TimeoutError = _subclass(Status.TIMEOUT, "A deadline passed", builtins.TimeoutError)
AbortedError = _subclass(Status.ABORTED, "The communicator was aborted")
AddressInUseError = _subclass(Status.ADDRESS_IN_USE, "A port is taken")
InternalError = _subclass(Status.INTERNAL, "A bug in libhpu")
HpuError.__module__ = "hpu"  # the public home of all of them: hpu.NotFoundError, ...


def error_for(status: int, message: str) -> HpuError:
    """The exception for a failed status: its subclass, or HpuError for an unknown number."""
    cls = _CLASSES.get(status)
    return cls(message) if cls else HpuError(message, status)
