"""libhpu's log level and profiler."""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Iterator

from . import _lib
from .errors import InvalidArgumentError

__all__ = ["LOG_LEVELS", "set_log_level", "get_log_level", "profiler_start", "profiler_stop",
           "profiler_summary", "profile"]

#: hpuLogLevel_t names, by number.
LOG_LEVELS = ("off", "error", "warn", "info", "debug", "trace")


def set_log_level(level: str) -> None:
    """Drops log lines below `level` ("off", "error", "warn", "info", "debug", "trace");
    overrides HPU_LOG_LEVEL."""
    if level not in LOG_LEVELS:
        raise InvalidArgumentError(f"level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    _lib.hpuSetLogLevel(LOG_LEVELS.index(level))


def get_log_level() -> str:
    """The current log level's name."""
    out = ctypes.c_int()
    _lib.hpuGetLogLevel(ctypes.byref(out))
    return LOG_LEVELS[out.value]


def profiler_start(path: str) -> None:
    """Records API calls, stream operations and memory changes into a Chrome/Perfetto trace at
    `path`, written by :func:`profiler_stop`."""
    _lib.hpuProfilerStart(str(path).encode())


def profiler_stop() -> None:
    """Stops recording and writes the trace."""
    _lib.hpuProfilerStop()


def profiler_summary() -> str:
    """The last stopped profile as a text table (operations by time, collectives by bytes)."""
    out = ctypes.c_void_p()
    _lib.hpuProfilerGetSummary(ctypes.byref(out))
    try:
        return ctypes.string_at(out.value).decode() if out.value else ""
    finally:
        _lib.hpuFree(out)


@contextmanager
def profile(path: str) -> Iterator[None]:
    """Profiles the block into a trace at `path`::

        with hpu.profile("trace.json"):
            ...
        print(hpu.profiler_summary())
    """
    profiler_start(path)
    try:
        yield
    finally:
        profiler_stop()
