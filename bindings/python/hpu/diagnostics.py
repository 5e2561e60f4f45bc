"""libhpu's log level, log routing (to a callback or to Python's :mod:`logging`) and profiler."""
from __future__ import annotations

import atexit
import ctypes
import logging
import re
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Union

from . import _abi, _lib
from .errors import InvalidArgumentError

__all__ = ["LOG_LEVELS", "set_log_level", "get_log_level", "set_log_callback", "log_to_logging", "log_write",
           "profiler_start", "profiler_stop", "profiler_summary", "profile"]

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


_callback: Optional[ctypes._CFuncPtr] = None  # kept alive while libhpu may call it
_callback_lock = threading.Lock()


def set_log_callback(fn: Optional[Callable[[str, str], None]]) -> None:
    """Routes libhpu's log lines to ``fn(level, line)`` instead of stderr (or HPU_LOG_FILE);
    None restores the default. `fn` runs on whichever libhpu thread logs, one line at a time;
    its exceptions are dropped (they cannot cross into libhpu)::

        hpu.set_log_callback(lambda level, line: print(level, line, file=sys.stderr))

    :func:`log_to_logging` installs one that feeds Python's :mod:`logging`.
    """
    global _callback
    with _callback_lock:
        if fn is None:
            _lib.hpuSetLogCallback(ctypes.cast(None, _abi.hpuLogCallback_t), None)
            _callback = None
            return

        def trampoline(level: int, line: bytes, user: int) -> None:
            try:
                fn(LOG_LEVELS[level] if 0 <= level < len(LOG_LEVELS) else str(level),
                   line.decode("utf-8", "replace"))
            except BaseException:
                pass

        callback = _abi.hpuLogCallback_t(trampoline)
        _lib.hpuSetLogCallback(callback, None)
        _callback = callback  # the previous one is no longer called once the call returns


#: Python logging levels of libhpu's levels (trace is 5, below DEBUG).
LOGGING_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG,
                  "trace": 5}

# "2026-11-21T10:55:12.123456Z hpu[1234] rank=0 device=1 WARN alloc: message" (hpuSetLogCallback(3))
_LINE = re.compile(r"^(?P<time>\S+) hpu\[(?P<pid>\d+)\] rank=(?P<rank>\S+) device=(?P<device>\S+) "
                   r"(?P<level>[A-Z]+) (?P<component>[\w.-]+): (?P<message>.*)$", re.S)


def log_to_logging(logger: Union[str, logging.Logger] = "hpu") -> None:
    """Routes libhpu's log lines into Python's :mod:`logging`: each becomes a record of the
    child logger named after its component (``hpu.comm``, ``hpu.trainer``, ``hpu.python``,
    ...) at the matching level (trace is level 5), whose message is the event's text. The
    records carry ``hpu_time``, ``hpu_pid``, ``hpu_rank``, ``hpu_device`` and
    ``hpu_component``. libhpu's level (``HPU_LOG_LEVEL``, :func:`set_log_level`) still drops
    lines first: set both to see debug lines::

        logging.basicConfig(level=logging.INFO)
        hpu.log_to_logging()
        hpu.set_log_level("info")

    Lines from libhpu's own threads are delivered on those threads (with the GIL), as
    :mod:`logging` handlers expect. :func:`set_log_callback` (None) undoes it."""
    parent = logging.getLogger(logger) if isinstance(logger, str) else logger

    def forward(level: str, line: str) -> None:
        m = _LINE.match(line)
        if not m:
            parent.log(LOGGING_LEVELS.get(level, logging.WARNING), "%s", line)
            return
        target = parent.getChild(m["component"])
        levelno = LOGGING_LEVELS.get(level, logging.WARNING)
        if target.isEnabledFor(levelno):
            target.log(levelno, "%s", m["message"], extra={
                "hpu_time": m["time"], "hpu_pid": int(m["pid"]), "hpu_component": m["component"],
                "hpu_rank": None if m["rank"] == "-" else int(m["rank"]),
                "hpu_device": None if m["device"] == "-" else int(m["device"])})

    set_log_callback(forward)




def log_write(level: str, message: str, component: str = "python") -> None:
    """Writes `message` through libhpu's logging as one line of `component` at `level`
    ("error", "warn", "info", "debug", "trace"): the level filter, HPU_LOG_FILE and the
    callback apply as to libhpu's own lines. The binding's own lines use it."""
    if level not in LOG_LEVELS[1:]:
        raise InvalidArgumentError(f"level {level!r} is not one of {', '.join(LOG_LEVELS[1:])}")
    _lib.hpuLogWrite(LOG_LEVELS.index(level), component.encode(), message.encode("utf-8", "replace"))


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
