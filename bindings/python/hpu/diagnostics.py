"""libhpu's log level and profiler."""
from __future__ import annotations

import atexit
import ctypes
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from . import _lib
from .errors import InvalidArgumentError

__all__ = ["LOG_LEVELS", "set_log_level", "get_log_level", "set_log_callback", "profiler_start", "profiler_stop",
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


_LogCallback_t = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_lib._declare({"hpuSetLogCallback": (_lib.Status, [_LogCallback_t, ctypes.c_void_p])})
_callback: Optional[ctypes._CFuncPtr] = None  # kept alive while libhpu may call it
_callback_lock = threading.Lock()


def set_log_callback(fn: Optional[Callable[[str, str], None]]) -> None:
    """Routes libhpu's log lines to ``fn(level, line)`` instead of stderr (or HPU_LOG_FILE);
    None restores the default. `fn` runs on whichever libhpu thread logs, one line at a time;
    its exceptions are dropped (they cannot cross into libhpu)::

        hpu.set_log_callback(lambda level, line: logging.getLogger("hpu").info(line))
    """
    global _callback
    with _callback_lock:
        if fn is None:
            _lib.hpuSetLogCallback(ctypes.cast(None, _LogCallback_t), None)
            _callback = None
            return

        def trampoline(level: int, line: bytes, user: int) -> None:
            try:
                fn(LOG_LEVELS[level] if 0 <= level < len(LOG_LEVELS) else str(level),
                   line.decode("utf-8", "replace"))
            except BaseException:
                pass

        callback = _LogCallback_t(trampoline)
        _lib.hpuSetLogCallback(callback, None)
        _callback = callback  # the previous one is no longer called once the call returns


@atexit.register
def _restore_default_log() -> None:
    if _callback is not None:  # libhpu's threads may log after the interpreter is gone
        try:
            set_log_callback(None)
        except Exception:
            pass


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
