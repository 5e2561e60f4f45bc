"""libhpu for Python: emulated Gaudi-style HPU devices, with the names of ``torch.hpu``.

Pure Python over ``ctypes``; the shared library is found next to the package,
through ``HPU_LIBRARY``, or on the system library path (``libhpu.so.0``).

>>> import hpu
>>> hpu.device_count()
8
>>> with hpu.Device(0):
...     mem = hpu.mem_alloc(1 << 20)
...     hpu.memory_stats()["InUse"]
1048576

``hpu.train(job)`` runs an ``hpu-train`` job in this process (through
libhpu-trainer, found the same way) and returns its final metrics;
``hpu.predict(ckpt_path, x)`` predicts samples with the model a checkpoint
holds.

Every failing call raises :class:`hpu.HpuError` (a subclass per status) with
the status name and libhpu's message.
"""
from __future__ import annotations

from . import _lib
from ._version import __version__
from .autocast import (AUTOCAST_LISTS, autocast, autocast_op_dtype, get_autocast_dtype, get_autocast_op_list,
                       is_autocast_enabled, set_autocast_op_list)
from .device import (Device, DeviceLike, DeviceProperties, current_device, device_count,
                     get_device_name, get_device_properties, is_available, set_device, synchronize)
from .diagnostics import (LOG_LEVELS, get_log_level, log_to_logging, log_write, profile, profiler_start,
                          profiler_stop, profiler_summary, set_log_callback, set_log_level)
from .dtypes import (DType, DTypeLike, bfloat16, bool_, double, float16, float32, float64, half, int8, int32,
                     int64, long, uint8, uint32, uint64)
from .errors import (AbortedError, AddressInUseError, BusyError, ConfigError, HpuError, InternalError,
                     InvalidArgumentError, InvalidHandleError, InvalidUsageError, IoError,
                     NotAvailableError, NotFoundError, NotReadyError, OutOfMemoryError, RemoteError,
                     Status, TimeoutError, UnsupportedError)
from .memory import (ALLOCATOR_STATS_KEYS, HABANA_STATS_KEYS, DeviceMemory, empty_cache, max_memory_allocated,
                     mem_alloc, mem_get_info, memory_allocated, memory_stats, reset_accumulated_memory_stats,
                     reset_peak_memory_stats)
from .stream import Event, Stream, current_stream, default_stream, stream
from .tensor import (Tensor, empty, from_numpy, frombuffer, full, get_rng_state, manual_seed, ones, rand, randn,
                     set_rng_state, tensor, zeros)
from . import ops
from .comm import Comm, ReduceOp, get_unique_id, group
from .dlpack import from_dlpack
from .training import predict, train, trainer_library_path
from .ops import (adamw_step, add, addmm, argmax, bmm, cast, cross_entropy, div, dropout, embedding, exp, gelu,
                  layer_norm, linear, log, log_softmax, matmul, mean, mm, mul, nll_loss, relu, sgd_step, sigmoid,
                  softmax, sub, sum, tan, tanh)


def library_path() -> str:
    """The path (or name) of the libhpu this binding loaded."""
    return _lib.path


def library_version() -> str:
    """libhpu's version, "major.minor.patch", from ``hpuGetVersion()``."""
    v = _lib.version_number
    return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"


# What `from hpu import *` gives: the public names, but not those that would shadow a
# builtin (hpu.sum, hpu.TimeoutError stay reachable as attributes).
__all__ = [name for name, value in list(globals().items())
           if not name.startswith("_") and name != "annotations" and not hasattr(__builtins__, name)
           and not (isinstance(__builtins__, dict) and name in __builtins__)
           and (not isinstance(value, type(_lib)) or name in ("ops", "dtypes", "errors"))]
