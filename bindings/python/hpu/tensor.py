"""Tensors on devices: creation from numpy, bytes or lists; views; host copies.

A :class:`Tensor` owns an ``hpuTensor_t`` handle: device, dtype, shape and
strides over device memory. Its dtype and shape are read once, so checks made
before a call cost nothing. Host data goes through numpy when it is there and
through the buffer protocol and ``struct`` otherwise; bfloat16 has no host type,
so its values travel as float32 and libhpu converts them on the device (round to
nearest even), while :meth:`Tensor.tobytes` and :func:`frombuffer` give its raw
bits.
"""
from __future__ import annotations

import ctypes
import math
import struct
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

from . import _abi, _lib, dtypes
from ._buffer import host_buffer
from .device import Device, DeviceLike, device_of_handle, resolve
from .dtypes import DType, DTypeLike
from .errors import InvalidArgumentError
from .stream import current_stream, stream_for

if TYPE_CHECKING:
    import numpy

__all__ = ["Tensor", "tensor", "from_numpy", "frombuffer", "empty", "zeros", "ones", "full", "rand", "randn",
           "manual_seed", "get_rng_state", "set_rng_state", "MAX_DIMS"]

MAX_DIMS = _abi.HPU_TENSOR_MAX_DIMS
Shape = Tuple[int, ...]
_Int64s = ctypes.c_int64 * MAX_DIMS


T = _lib.Handle


def _numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


def _shape_arg(shape: Sequence[Any], name: str = "shape") -> Shape:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    out = tuple(shape)
    if len(out) > MAX_DIMS:
        raise InvalidArgumentError(f"{name} {out} has {len(out)} dims; at most {MAX_DIMS}")
    for s in out:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise InvalidArgumentError(f"{name} {out} has a size that is not a non-negative int: {s!r}")
    return out


def _numel(shape: Shape) -> int:
    return math.prod(shape)


class Tensor:
    """A tensor on an HPU device. Make one with :func:`hpu.tensor`, :func:`hpu.empty`,
    :func:`hpu.zeros`, :func:`hpu.frombuffer`, ... or get one from an op."""

    __slots__ = ("_handle", "dtype", "shape", "device", "__weakref__")

    def __init__(self, handle: int) -> None:
        """Takes ownership of an ``hpuTensor_t`` handle (released with the object)."""
        self._handle = handle
        d, n, dims, dev = ctypes.c_int(), ctypes.c_int(), _Int64s(), T()
        _lib.hpuTensorGetDtype(handle, ctypes.byref(d))
        _lib.hpuTensorGetShape(handle, ctypes.byref(n), dims)
        _lib.hpuTensorGetDevice(handle, ctypes.byref(dev))
        self.dtype: DType = dtypes.from_value(d.value)
        self.shape: Shape = tuple(dims[i] for i in range(n.value))
        self.device: Device = device_of_handle(dev.value)

    @property
    def handle(self) -> int:
        """The ``hpuTensor_t`` handle, for calling the C API directly."""
        return self._handle

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            try:
                _lib.hpuTensorRelease(handle)
            except Exception:
                pass

    # ---- introspection ------------------------------------------------------
    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    def dim(self) -> int:
        """The number of dims (torch's spelling of :attr:`ndim`)."""
        return len(self.shape)

    def size(self, dim: Optional[int] = None) -> Union[Shape, int]:
        """The shape, or the size of one dim (negative counts from the end)."""
        return self.shape if dim is None else self.shape[self._dim(dim, "dim")]

    def numel(self) -> int:
        """The number of elements."""
        return _numel(self.shape)

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (numel x element_size)."""
        return self.numel() * self.dtype.itemsize

    def stride(self) -> Shape:
        """Strides in elements."""
        out = _Int64s()
        _lib.hpuTensorGetStrides(self._handle, out)
        return tuple(out[i] for i in range(self.ndim))

    def is_contiguous(self) -> bool:
        """Whether the elements are dense in row-major order (views may not be)."""
        out = ctypes.c_int()
        _lib.hpuTensorIsContiguous(self._handle, ctypes.byref(out))
        return bool(out.value)

    def data_ptr(self) -> int:
        """Device address of element 0 (0 for an empty tensor)."""
        out = ctypes.c_void_p()
        _lib.hpuTensorGetData(self._handle, ctypes.byref(out))
        return out.value or 0

    # ---- DLPack ----------------------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None) -> Any:
        """A DLPack capsule sharing this tensor's memory (``numpy.from_dlpack``,
        ``torch.from_dlpack`` call it): "dltensor_versioned" (DLPack 1.0) when `max_version` is
        (1, 0) or later, else "dltensor". It waits first for the work queued on `stream`: an
        hpu.Stream, or None for this thread's current stream of the tensor's device. The memory
        stays allocated until the consumer lets go, even when this tensor is released."""
        from . import dlpack
        return dlpack.to_capsule(self, stream, max_version)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0): the emulated devices' memory is host memory."""
        from . import dlpack
        return (dlpack.KDLCPU, 0)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-dim tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        body = ""
        if self.numel() <= 16:
            try:
                body = f"{self.tolist()}, "
            except Exception:
                pass
        return f"hpu.Tensor({body}shape={self.shape}, dtype={self.dtype!r}, device='{self.device}')"

    def _dim(self, dim: int, name: str) -> int:
        n = self.ndim
        if not isinstance(dim, int) or not -max(n, 1) <= dim < max(n, 1):
            raise InvalidArgumentError(f"{name} {dim!r} is out of range for a tensor of {n} dims")
        return dim % max(n, 1)

    # ---- host data ----------------------------------------------------------
    def tobytes(self) -> bytes:
        """The elements as raw bytes, row-major (bfloat16: its bits)."""
        out = bytearray(self.nbytes)
        self._copy_to(out)
        return bytes(out)

    def _copy_to(self, dst: Any) -> None:
        with host_buffer(dst, writable=True, name="dst") as (addr, n):
            if n != self.nbytes:
                raise InvalidArgumentError(f"dst has {n} bytes; the tensor has {self.nbytes}")
            if n:
                _lib.hpuTensorCopyToHost(stream_for(self.device.index), self._handle, addr, n)

    def _host_dtype(self) -> DType:
        return dtypes.float32 if self.dtype is dtypes.bfloat16 else self.dtype

    def numpy(self) -> "numpy.ndarray":
        """A new numpy array of the elements (bfloat16 comes back as float32). Needs numpy."""
        np = _numpy()
        if np is None:
            raise ImportError("Tensor.numpy() needs numpy; use tolist() or tobytes() without it")
        src = self.to(dtypes.float32) if self.dtype is dtypes.bfloat16 else self
        out = np.empty(self.shape, dtype=src.dtype.numpy)
        src._copy_to(out)
        return out

    def tolist(self) -> Any:
        """The elements as (nested) Python lists (a number for a 0-dim tensor)."""
        src = self.to(dtypes.float32) if self.dtype is dtypes.bfloat16 else self
        values = struct.unpack(f"<{src.numel()}{src.dtype.format}", src.tobytes())

        def nest(offset: int, dims: Shape) -> Any:
            if not dims:
                return values[offset]
            step = _numel(dims[1:])
            return [nest(offset + i * step, dims[1:]) for i in range(dims[0])]
        return nest(0, self.shape) if self.numel() else _empty_nested(self.shape)

    def item(self) -> Union[int, float, bool]:
        """The value of a one-element tensor."""
        if self.numel() != 1:
            raise InvalidArgumentError(f"item() needs one element; the tensor has shape {self.shape}")
        v = self.tolist()
        while isinstance(v, list):
            v = v[0]
        return v

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    # ---- in place -------------------------------------------------------------
    def fill_(self, value: float) -> "Tensor":
        """Sets every element to `value` (converted to the dtype); queued."""
        _lib.hpuTensorFill(stream_for(self.device.index), self._handle, float(value))
        return self

    def zero_(self) -> "Tensor":
        """Sets every element to 0; queued."""
        return self.fill_(0)

    def uniform_(self, low: float = 0.0, high: float = 1.0) -> "Tensor":
        """Uniform in [low, high) from the device's generator (floating tensors)."""
        _lib.hpuTensorFillUniform(stream_for(self.device.index), self._handle, low, high)
        return self

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> "Tensor":
        """Normal(mean, std) from the device's generator (floating tensors)."""
        _lib.hpuTensorFillNormal(stream_for(self.device.index), self._handle, mean, std)
        return self

    def copy_(self, src: Union["Tensor", Any]) -> "Tensor":
        """Copies `src` (a tensor of the same shape, on any device and of any dtype, or host
        data) into this tensor, converting the dtype. Across devices the copy waits for the
        work queued on `src`'s device so far, and work queued there later waits for the
        copy, as torch's does."""
        if not isinstance(src, Tensor):
            src = tensor(src, device=self.device)
        if src.shape != self.shape:
            raise InvalidArgumentError(f"copy_: src has shape {src.shape}, this tensor {self.shape}")
        if src.device == self.device:
            _lib.hpuTensorCopy(stream_for(self.device.index), self._handle, src._handle)
            return self
        # libhpu queues the copy on one stream, here this device's. As torch does, order it
        # after the work queued on the source's device and that work's later writes after it.
        stream, src_stream = current_stream(self.device), current_stream(src.device)
        stream.wait_stream(src_stream)
        _lib.hpuTensorCopy(stream.handle, self._handle, src._handle)
        src_stream.wait_stream(stream)
        return self

    # ---- conversions ----------------------------------------------------------
    def to(self, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> "Tensor":
        """This tensor in another dtype and/or on another device (itself when nothing changes)."""
        if isinstance(dtype, (Device, int, str)) and not _is_dtype_name(dtype) and device is None:
            dtype, device = None, dtype  # t.to("hpu:1") / t.to(1)
        dt = dtypes.resolve(dtype) if dtype is not None else self.dtype
        dev = resolve(device) if device is not None else self.device
        if dt is self.dtype and dev == self.device:
            return self
        return empty(self.shape, dtype=dt, device=dev).copy_(self)

    def clone(self) -> "Tensor":
        """A new contiguous tensor with a copy of the elements."""
        return empty(self.shape, dtype=self.dtype, device=self.device).copy_(self)

    def contiguous(self) -> "Tensor":
        """Itself when contiguous, else a contiguous copy."""
        return self if self.is_contiguous() else self.clone()

    def float(self) -> "Tensor":
        """:meth:`to` float32."""
        return self.to(dtypes.float32)

    def double(self) -> "Tensor":
        """:meth:`to` float64."""
        return self.to(dtypes.float64)

    def half(self) -> "Tensor":
        """:meth:`to` float16."""
        return self.to(dtypes.float16)

    def bfloat16(self) -> "Tensor":
        """:meth:`to` bfloat16."""
        return self.to(dtypes.bfloat16)

    def long(self) -> "Tensor":
        """:meth:`to` int64."""
        return self.to(dtypes.int64)

    def int(self) -> "Tensor":
        """:meth:`to` int32."""
        return self.to(dtypes.int32)

    # ---- views -----------------------------------------------------------------
    def reshape(self, *shape: Any) -> "Tensor":
        """Same elements in a new shape (one size may be -1); a view when contiguous."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        sizes = [s for s in shape if s != -1]
        _shape_arg(sizes)
        if list(shape).count(-1) > 1 or len(shape) > MAX_DIMS:
            raise InvalidArgumentError(f"shape {tuple(shape)}: at most one -1 and {MAX_DIMS} dims")
        known = _numel(tuple(sizes))
        if (-1 not in shape and known != self.numel()) or (-1 in shape and (known == 0 or self.numel() % known)):
            raise InvalidArgumentError(f"shape {tuple(shape)} does not fit {self.numel()} elements "
                                       f"(shape {self.shape})")
        base = self.contiguous()
        out = T()
        _lib.hpuTensorReshape(ctypes.byref(out), base._handle, len(shape), (ctypes.c_int64 * max(1, len(shape)))(*shape))
        return Tensor(out.value)

    view = reshape

    def flatten(self) -> "Tensor":
        """A 1-dim view (a copy when not contiguous), as reshape(-1)."""
        return self.reshape(-1)

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        """A view with two dims swapped."""
        d0, d1 = self._dim(dim0, "dim0"), self._dim(dim1, "dim1")
        out = T()
        _lib.hpuTensorTranspose(ctypes.byref(out), self._handle, d0, d1)
        return Tensor(out.value)

    @property
    def T(self) -> "Tensor":
        """The transpose of a 2-dim tensor (a view)."""
        if self.ndim != 2:
            raise InvalidArgumentError(f"T needs 2 dims; the tensor has shape {self.shape}")
        return self.transpose(0, 1)

    def __getitem__(self, index: Any) -> "Tensor":
        """Basic indexing: ints and slices with step >= 1, one per leading dim."""
        items = index if isinstance(index, tuple) else (index,)
        if len(items) > self.ndim:
            raise InvalidArgumentError(f"index {index!r} has {len(items)} entries; the tensor has {self.ndim} dims")
        view, drop = self, []
        for dim, item in enumerate(items):
            size = self.shape[dim]
            if isinstance(item, int) and not isinstance(item, bool):
                if not -size <= item < size:
                    raise InvalidArgumentError(f"index {item} is out of range for dim {dim} of size {size}")
                start, stop, step = item % size, item % size + 1, 1
                drop.append(dim)
            elif isinstance(item, slice):
                start, stop, step = item.indices(size)
                if step < 1:
                    raise InvalidArgumentError(f"slice step {step} on dim {dim}: only steps >= 1")
                stop = max(start, stop)
            else:
                raise TypeError(f"tensor indices must be ints or slices, not {type(item).__name__}")
            if (start, stop, step) != (0, size, 1):
                out = T()
                _lib.hpuTensorSlice(ctypes.byref(out), view._handle, dim, start, stop, step)
                view = Tensor(out.value)
        if drop:
            view = view.reshape([s for d, s in enumerate(view.shape) if d not in drop])
        return view

    def __setitem__(self, index: Any, value: Any) -> None:
        target = self[index]
        if isinstance(value, (int, float, bool)):
            target.fill_(value)
        else:
            target.copy_(value)


def _is_dtype_name(x: Any) -> bool:
    try:
        dtypes.resolve(x)
        return True
    except InvalidArgumentError:
        return False


def _empty_nested(shape: Shape) -> Any:
    if not shape or shape[0] == 0:
        return []
    return [_empty_nested(shape[1:]) for _ in range(shape[0])]


def empty(*shape: Any, dtype: DTypeLike = dtypes.float32, device: DeviceLike = None) -> Tensor:
    """A new contiguous tensor with unspecified contents."""
    dims = _shape_arg(shape)
    dt = dtypes.resolve(dtype)
    out = T()
    _lib.hpuTensorCreate(ctypes.byref(out), resolve(device).handle, dt.value, len(dims),
                         (ctypes.c_int64 * max(1, len(dims)))(*dims))
    return Tensor(out.value)


def full(shape: Union[int, Sequence[int]], value: float, dtype: DTypeLike = dtypes.float32,
         device: DeviceLike = None) -> Tensor:
    """A new tensor with every element `value`."""
    return empty(*(shape if isinstance(shape, (tuple, list)) else (shape,)), dtype=dtype, device=device).fill_(value)


def zeros(*shape: Any, dtype: DTypeLike = dtypes.float32, device: DeviceLike = None) -> Tensor:
    """A new tensor of zeros (shape as ints or one tuple)."""
    return empty(*shape, dtype=dtype, device=device).fill_(0)


def ones(*shape: Any, dtype: DTypeLike = dtypes.float32, device: DeviceLike = None) -> Tensor:
    """A new tensor of ones (shape as ints or one tuple)."""
    return empty(*shape, dtype=dtype, device=device).fill_(1)


def rand(*shape: Any, dtype: DTypeLike = dtypes.float32, device: DeviceLike = None) -> Tensor:
    """Uniform in [0, 1) from the device's generator."""
    return empty(*shape, dtype=dtype, device=device).uniform_()


def randn(*shape: Any, dtype: DTypeLike = dtypes.float32, device: DeviceLike = None) -> Tensor:
    """Standard normal from the device's generator."""
    return empty(*shape, dtype=dtype, device=device).normal_()


def _from_host(data: Any, host: DType, shape: Shape, dtype: DType, device: DeviceLike) -> Tensor:
    """A tensor of `dtype` from host memory holding `shape` elements of `host` (converted on the device)."""
    dev = resolve(device)
    with host_buffer(data, name="data") as (addr, n):
        if n != _numel(shape) * host.itemsize:
            raise InvalidArgumentError(f"data has {n} bytes; shape {shape} of {host!r} needs "
                                       f"{_numel(shape) * host.itemsize}")
        out = T()
        _lib.hpuTensorCreateFromHost(ctypes.byref(out), dev.handle, host.value, len(shape),
                                     (ctypes.c_int64 * max(1, len(shape)))(*shape), addr or None)
    t = Tensor(out.value)
    return t if host is dtype else t.to(dtype)


def frombuffer(data: Any, dtype: DTypeLike, shape: Optional[Sequence[int]] = None,
               device: DeviceLike = None) -> Tensor:
    """A tensor of the raw bytes of `data` (bytes, bytearray, any buffer) read as `dtype`
    (bfloat16: raw bits), 1-dim or of `shape`."""
    dt = dtypes.resolve(dtype)
    with host_buffer(data, name="data") as (_, n):
        pass
    dims = _shape_arg(shape) if shape is not None else (n // dt.itemsize,)
    return _from_host(data, dt, dims, dt, device)


def _infer(values: Any) -> Tuple[list, Shape, DType]:
    """Flattens nested lists of numbers: (flat, shape, the torch default dtype)."""
    shape: List[int] = []
    probe = values
    while isinstance(probe, (list, tuple)):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    flat: list = []

    def walk(v: Any, depth: int) -> None:
        if depth == len(shape):
            if isinstance(v, (list, tuple)):
                raise InvalidArgumentError(f"data is ragged: a list where a number belongs at depth {depth}")
            flat.append(v)
            return
        if not isinstance(v, (list, tuple)) or len(v) != shape[depth]:
            raise InvalidArgumentError(f"data is ragged: expected {shape[depth]} entries at depth {depth}")
        for x in v:
            walk(x, depth + 1)
    walk(values, 0)
    if all(isinstance(x, bool) for x in flat) and flat:
        kind = dtypes.bool_
    elif all(isinstance(x, int) for x in flat):
        kind = dtypes.int64 if flat else dtypes.float32
    elif all(isinstance(x, (int, float)) for x in flat):
        kind = dtypes.float32
    else:
        bad = next(x for x in flat if not isinstance(x, (int, float)))
        raise TypeError(f"data holds a {type(bad).__name__}; tensors hold numbers")
    return flat, tuple(shape), kind


def tensor(data: Any, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Tensor:
    """A new tensor from host data: a numpy array, any typed buffer (array.array, memoryview),
    a tensor, or (nested lists of) numbers. `dtype` defaults to the data's (float32 for
    Python floats, int64 for ints, as torch does); bfloat16 data comes from floats."""
    dt = dtypes.resolve(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        out = data.to(dtype=dt or data.dtype, device=data.device if device is None else device)
        return out.clone() if out is data else out
    np = _numpy()
    if np is not None and isinstance(data, np.ndarray):
        host = dtypes.resolve(data.dtype)
        return _from_host(np.ascontiguousarray(data), host, tuple(data.shape), dt or host, device)
    if isinstance(data, (bytes, bytearray)):
        raise TypeError("bytes have no element type: use hpu.frombuffer(data, dtype, shape)")
    try:
        view = memoryview(data)
    except TypeError:
        view = None
    if view is not None:
        host = dtypes.from_format(view.format)
        if host is None:
            raise InvalidArgumentError(f"data's buffer format {view.format!r} is not a libhpu data type")
        return _from_host(data, host, tuple(view.shape), dt or host, device)
    flat, shape, kind = _infer(data if isinstance(data, (list, tuple)) else [data])
    if not isinstance(data, (list, tuple)):
        shape = ()
    target = dt or kind
    host = target if target.format else dtypes.float32
    packed = struct.pack(f"{len(flat)}{host.format}", *flat) if flat else b""
    return _from_host(bytearray(packed), host, shape, target, device)


def from_numpy(array: "numpy.ndarray", device: DeviceLike = None) -> Tensor:
    """A new tensor with a numpy array's dtype, shape and values."""
    return tensor(array, device=device)


def manual_seed(seed: int, device: DeviceLike = None) -> None:
    """Seeds a device's generator (and restarts its counter)."""
    _lib.hpuRandomSeed(resolve(device).handle, seed)


def get_rng_state(device: DeviceLike = None) -> Tuple[int, int]:
    """(seed, offset) of a device's generator."""
    s = _lib.sized(_abi.hpuRandomState_t)
    _lib.hpuRandomGetState(resolve(device).handle, ctypes.byref(s))
    return s.seed, s.offset


def set_rng_state(state: Tuple[int, int], device: DeviceLike = None) -> None:
    """Restores what :func:`get_rng_state` returned."""
    s = _lib.sized(_abi.hpuRandomState_t)
    s.seed, s.offset = state
    _lib.hpuRandomSetState(resolve(device).handle, ctypes.byref(s))
