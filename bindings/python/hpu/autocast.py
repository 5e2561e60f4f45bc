"""Habana-style autocast: which precision each op runs in.

``with hpu.autocast(dtype=hpu.bfloat16):`` (or ``@hpu.autocast(...)`` on a
function) makes the ops the calling thread enqueues inside run as Habana's op
lists say: ops in the lower-precision list run their floating inputs in
bfloat16 (or float16), ops in the fp32 list in float32, ops in the promote list
in the widest input type. Regions nest, and ``enabled=False`` turns autocast off
inside an enabled region. Like Habana's, libhpu never caches casts.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable, Iterable, List, Optional, Tuple, TypeVar

from . import _lib, dtypes
from .errors import InvalidArgumentError

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "AUTOCAST_LISTS", "get_autocast_op_list",
           "set_autocast_op_list", "autocast_op_dtype"]

F = TypeVar("F", bound=Callable[..., Any])

#: The op lists, in precedence order: lower precision > fp32 > promote.
AUTOCAST_LISTS = ("lower_precision", "fp32", "promote")


class autocast:
    """An autocast region, as a context manager or a decorator.

    Args:
        device_type: "hpu" (accepted for ``torch.autocast`` compatibility).
        dtype: the lower-precision type, :data:`hpu.bfloat16` (default) or :data:`hpu.float16`.
        enabled: False turns autocast off inside an enclosing region.
        cache_enabled: accepted and ignored: libhpu, like Habana, never caches casts.
    """

    def __init__(self, device_type: str = "hpu", dtype: Optional[dtypes.DTypeLike] = None, enabled: bool = True,
                 cache_enabled: Optional[bool] = None) -> None:
        if device_type != "hpu":
            raise InvalidArgumentError(f"device_type {device_type!r} is not 'hpu'")
        self.dtype = dtypes.resolve(dtype) if dtype is not None else dtypes.bfloat16
        if self.dtype not in (dtypes.bfloat16, dtypes.float16):
            raise InvalidArgumentError(f"dtype {self.dtype!r} is not hpu.bfloat16 or hpu.float16")
        self.enabled = bool(enabled)

    def __enter__(self) -> "autocast":
        _lib.hpuAutocastPush(int(self.enabled), self.dtype.value)
        return self

    def __exit__(self, *exc: object) -> None:
        _lib.hpuAutocastPop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return run  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"hpu.autocast(dtype={self.dtype!r}, enabled={self.enabled})"


def _state() -> Tuple[bool, dtypes.DType]:
    enabled, dtype = ctypes.c_int(), ctypes.c_int()
    _lib.hpuAutocastGetState(ctypes.byref(enabled), ctypes.byref(dtype))
    return bool(enabled.value), dtypes.from_value(dtype.value)


def is_autocast_enabled() -> bool:
    """Whether the calling thread is inside an enabled autocast region."""
    return _state()[0]


def get_autocast_dtype() -> dtypes.DType:
    """The lower-precision type of the calling thread's innermost region (bfloat16 outside any)."""
    return _state()[1]


def _which(which: str) -> int:
    try:
        return AUTOCAST_LISTS.index(which)
    except ValueError:
        raise InvalidArgumentError(f"list {which!r} is not one of {', '.join(AUTOCAST_LISTS)}") from None


def get_autocast_op_list(which: str) -> List[str]:
    """The op names of one list ("lower_precision", "fp32" or "promote"), sorted."""
    out = ctypes.c_void_p()
    _lib.hpuAutocastGetOpList(_which(which), ctypes.byref(out))
    try:
        text = ctypes.string_at(out.value).decode() if out.value else ""
    finally:
        _lib.hpuFree(out)
    return text.split()


def set_autocast_op_list(which: str, ops: Iterable[str]) -> None:
    """Replaces one list for the whole process, for ops enqueued afterwards (as Habana's
    PT_HPU_AUTOCAST_*_OPS_LIST files do at start-up). Unknown names are kept, and libhpu
    logs a warning naming the nearest known op."""
    names = [op.encode() if isinstance(op, str) else op for op in ops]
    if not all(isinstance(n, bytes) for n in names):
        raise TypeError("ops must be strings")
    array = (ctypes.c_char_p * max(1, len(names)))(*names)
    _lib.hpuAutocastSetOpList(_which(which), array, len(names))


def autocast_op_dtype(op: str, *input_dtypes: dtypes.DTypeLike) -> dtypes.DType:
    """The type the first tensor input of `op` (an ATen base name, "mm") runs in if the calling
    thread enqueued it now, given the dtypes of its tensor inputs."""
    if not input_dtypes:
        raise InvalidArgumentError("autocast_op_dtype needs the dtype of at least one input")
    values = [dtypes.resolve(d).value for d in input_dtypes]
    array = (ctypes.c_int * len(values))(*values)
    out = ctypes.c_int()
    _lib.hpuAutocastGetOpDtype(op.encode(), array, len(values), ctypes.byref(out))
    return dtypes.from_value(out.value)
