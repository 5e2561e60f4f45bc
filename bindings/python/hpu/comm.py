"""Collectives between devices, with the names of ``torch.distributed``.

A :class:`Comm` is one rank of a group, bound to one device; its collectives
work on that device's tensors, in place as torch's do, and are queued on the
thread's stream for the device (see :func:`hpu.stream`; the default stream
otherwise): a later op, copy or ``numpy()`` on that stream sees the result.
``Comm.init_all(devices)`` makes every rank of a group in this process;
``Comm.init_rank`` joins one rank of a group spread over threads (or, with a
shared unique id, processes).
"""
from __future__ import annotations

import ctypes
import enum
from contextlib import contextmanager
from ctypes import c_double, c_int
from typing import Iterator, List, Optional, Sequence, Union

from . import _abi, _lib
from .device import Device, DeviceLike, resolve
from .errors import InvalidArgumentError, error_for
from .stream import stream_for
from .tensor import T, Tensor, empty

__all__ = ["ReduceOp", "Comm", "get_unique_id", "UNIQUE_ID_BYTES", "group"]

UNIQUE_ID_BYTES = _abi.HPU_UNIQUE_ID_BYTES


class ReduceOp(enum.IntEnum):
    """Reduction operations (``hpuRedOp_t``), named as ``torch.distributed.ReduceOp``."""

    SUM = _abi.HPU_SUM
    PRODUCT = _abi.HPU_PROD
    MIN = _abi.HPU_MIN
    MAX = _abi.HPU_MAX
    AVG = _abi.HPU_AVG


_OP_NAMES = {"sum": ReduceOp.SUM, "product": ReduceOp.PRODUCT, "prod": ReduceOp.PRODUCT, "min": ReduceOp.MIN,
             "max": ReduceOp.MAX, "avg": ReduceOp.AVG, "mean": ReduceOp.AVG}


def _op(op: Union[ReduceOp, str, int]) -> int:
    if isinstance(op, str):
        if op.lower() not in _OP_NAMES:
            raise InvalidArgumentError(f"op {op!r} is not one of sum, product, min, max, avg")
        return _OP_NAMES[op.lower()]
    try:
        return ReduceOp(op)
    except ValueError:
        raise InvalidArgumentError(f"op {op!r} is not a ReduceOp") from None


def get_unique_id() -> bytes:
    """A new rendezvous token (with a fresh random secret) for :meth:`Comm.init_rank`."""
    uid = _abi.hpuUniqueId_t()
    _lib.hpuGetUniqueId(ctypes.byref(uid))
    return bytes(ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES))


class Comm:
    """One rank of a communicator group. Destroyed by :meth:`destroy` or when collected."""

    def __init__(self, handle: int, device: Device) -> None:
        self._handle: int = handle
        self._live = True
        self.device: Device = device
        n, r = c_int(), c_int()
        _lib.hpuCommCount(handle, ctypes.byref(n))
        _lib.hpuCommUserRank(handle, ctypes.byref(r))
        self.world_size: int = n.value  #: number of ranks in the group
        self.rank: int = r.value        #: this communicator's rank

    @classmethod
    def init_all(cls, devices: Optional[Sequence[DeviceLike]] = None) -> List["Comm"]:
        """A whole group in this process: rank i on devices[i] (every visible device by default)."""
        from .device import device_count
        devs = [resolve(d) for d in (devices if devices is not None else range(device_count()))]
        if not devs:
            raise InvalidArgumentError("init_all: no devices")
        if len({d.index for d in devs}) != len(devs):
            raise InvalidArgumentError(f"init_all: devices {[d.index for d in devs]} repeat one")
        comms = (_abi.hpuComm_t * len(devs))()
        _lib.hpuCommInitAll(comms, len(devs), (T * len(devs))(*[d.handle for d in devs]))
        return [cls(comms[i], devs[i]) for i in range(len(devs))]

    @classmethod
    def from_env(cls, devices: Optional[Sequence[DeviceLike]] = None) -> List["Comm"]:
        """The ranks of this process in the job its launcher describes (torchrun/Lightning's
        MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK or NODE_RANK; Open MPI's OMPI_COMM_WORLD_*;
        Slurm's SLURM_*; HPU_* variables win): with P processes of len(devices) devices each,
        this process's launch rank p hosts ranks p * len(devices) + i. WORLD_SIZE counts ranks,
        as in torchrun and Lightning (P * len(devices)); the other counts are processes.
        Without a launcher it is :meth:`init_all`. Blocks until every rank of the job has joined."""
        from .device import device_count
        devs = [resolve(d) for d in (devices if devices is not None else range(device_count()))]
        if not devs:
            raise InvalidArgumentError("from_env: no devices")
        comms = (_abi.hpuComm_t * len(devs))()
        _lib.hpuCommInitFromEnv(comms, len(devs), (T * len(devs))(*[d.handle for d in devs]))
        return [cls(comms[i], devs[i]) for i in range(len(devs))]

    @classmethod
    def init_rank(cls, device: DeviceLike, world_size: int, unique_id: bytes, rank: int) -> "Comm":
        """Joins rank `rank` of the group named by `unique_id` (from :func:`get_unique_id`),
        blocking until all `world_size` ranks have joined (each from its own thread or process)."""
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != UNIQUE_ID_BYTES:
            raise InvalidArgumentError(f"unique_id must be the {UNIQUE_ID_BYTES} bytes get_unique_id() returns")
        dev = resolve(device)
        uid = _abi.hpuUniqueId_t.from_buffer_copy(bytes(unique_id))
        out = _abi.hpuComm_t()
        _lib.hpuCommInitRank(ctypes.byref(out), dev.handle, world_size, ctypes.byref(uid), rank)
        return cls(out.value, dev)

    @property
    def handle(self) -> int:
        """The ``hpuComm_t`` handle, for calling the C API directly."""
        return self._handle

    def get_rank(self) -> int:
        """This rank (torch.distributed.get_rank)."""
        return self.rank

    def get_world_size(self) -> int:
        """The number of ranks (torch.distributed.get_world_size)."""
        return self.world_size

    @property
    def timeout(self) -> float:
        """Seconds each wait of a later operation may take (HPU_COMM_TIMEOUT by default)."""
        out = c_double()
        _lib.hpuCommGetTimeout(self._handle, ctypes.byref(out))
        return out.value

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        _lib.hpuCommSetTimeout(self._handle, seconds)

    # ---- checks ---------------------------------------------------------------
    def _tensor(self, op: str, name: str, t: Tensor) -> Tensor:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be an hpu.Tensor, not {type(t).__name__}")
        if t.device != self.device:
            raise InvalidArgumentError(f"{op}: {name} is on {t.device}; rank {self.rank} works on {self.device}")
        if not t.is_contiguous():
            raise InvalidArgumentError(f"{op}: {name} (shape {t.shape}) is not contiguous; use .contiguous()")
        return t

    def _pair(self, op: str, out: Tensor, inp: Tensor, out_numel: int) -> None:
        self._tensor(op, "output", out)
        self._tensor(op, "input", inp)
        if out.dtype is not inp.dtype:
            raise InvalidArgumentError(f"{op}: output is {out.dtype!r} but input {inp.dtype!r}")
        if out.numel() != out_numel:
            raise InvalidArgumentError(f"{op}: output has {out.numel()} elements; {out_numel} are needed "
                                       f"(input {inp.numel()} x world_size {self.world_size} or / world_size)")

    def _stream(self) -> Optional[int]:
        return stream_for(self.device.index)

    # ---- collectives ----------------------------------------------------------
    def all_reduce(self, tensor: Tensor, op: Union[ReduceOp, str] = ReduceOp.SUM) -> Tensor:
        """tensor = op over all ranks of tensor, in place."""
        self._tensor("all_reduce", "tensor", tensor)
        ptr = tensor.data_ptr()
        _lib.hpuAllreduce(self._stream(), self._handle, ptr, ptr, tensor.numel(), tensor.dtype.value, _op(op))
        return tensor

    def broadcast(self, tensor: Tensor, src: int = 0) -> Tensor:
        """tensor = rank `src`'s tensor, on every rank."""
        self._tensor("broadcast", "tensor", tensor)
        ptr = tensor.data_ptr()
        _lib.hpuBroadcast(self._stream(), self._handle, ptr, ptr, tensor.numel(), tensor.dtype.value, src)
        return tensor

    def reduce(self, tensor: Tensor, dst: int = 0, op: Union[ReduceOp, str] = ReduceOp.SUM) -> Tensor:
        """On rank `dst`, tensor = op over all ranks of tensor (others' tensors are left alone)."""
        self._tensor("reduce", "tensor", tensor)
        ptr = tensor.data_ptr()
        _lib.hpuReduce(self._stream(), self._handle, ptr, ptr, tensor.numel(), tensor.dtype.value, _op(op), dst)
        return tensor

    def all_gather_into_tensor(self, output: Tensor, input: Tensor) -> Tensor:
        """output = the inputs of ranks 0..world_size-1, concatenated (flat)."""
        self._pair("all_gather_into_tensor", output, input, input.numel() * self.world_size)
        _lib.hpuAllgather(self._stream(), self._handle, input.data_ptr(), output.data_ptr(), input.numel(),
                          input.dtype.value)
        return output

    def all_gather(self, tensor_list: List[Tensor], tensor: Tensor) -> List[Tensor]:
        """tensor_list[r] = rank r's tensor."""
        if len(tensor_list) != self.world_size:
            raise InvalidArgumentError(f"all_gather: tensor_list has {len(tensor_list)} tensors; world_size is "
                                       f"{self.world_size}")
        gathered = empty(self.world_size * tensor.numel(), dtype=tensor.dtype, device=self.device)
        self.all_gather_into_tensor(gathered, tensor)
        for r, out in enumerate(tensor_list):
            self._tensor("all_gather", f"tensor_list[{r}]", out)
            out.copy_(gathered[r * tensor.numel():(r + 1) * tensor.numel()].reshape(out.shape))
        return tensor_list

    def reduce_scatter_tensor(self, output: Tensor, input: Tensor,
                              op: Union[ReduceOp, str] = ReduceOp.SUM) -> Tensor:
        """output = op over all ranks of this rank's block of input (input has world_size blocks)."""
        if input.numel() % self.world_size:
            raise InvalidArgumentError(f"reduce_scatter_tensor: input has {input.numel()} elements, not a multiple "
                                       f"of world_size {self.world_size}")
        self._pair("reduce_scatter_tensor", output, input, input.numel() // self.world_size)
        _lib.hpuReduceScatter(self._stream(), self._handle, input.data_ptr(), output.data_ptr(), output.numel(),
                              input.dtype.value, _op(op))
        return output

    def reduce_scatter(self, output: Tensor, input_list: List[Tensor],
                       op: Union[ReduceOp, str] = ReduceOp.SUM) -> Tensor:
        """output = op over all ranks of input_list[rank]."""
        if len(input_list) != self.world_size:
            raise InvalidArgumentError(f"reduce_scatter: input_list has {len(input_list)} tensors; world_size is "
                                       f"{self.world_size}")
        flat = empty(self.world_size * output.numel(), dtype=output.dtype, device=self.device)
        for r, t in enumerate(input_list):
            flat[r * output.numel():(r + 1) * output.numel()].copy_(self._tensor("reduce_scatter", "input", t)
                                                                   .reshape(-1))
        return self.reduce_scatter_tensor(output, flat, op)

    def all_to_all_single(self, output: Tensor, input: Tensor) -> Tensor:
        """Block r of output = block `rank` of rank r's input (world_size equal blocks)."""
        if input.numel() % self.world_size:
            raise InvalidArgumentError(f"all_to_all_single: input has {input.numel()} elements, not a multiple of "
                                       f"world_size {self.world_size}")
        self._pair("all_to_all_single", output, input, input.numel())
        _lib.hpuAlltoall(self._stream(), self._handle, input.data_ptr(), output.data_ptr(),
                         input.numel() // self.world_size, input.dtype.value)
        return output

    def barrier(self) -> None:
        """Queues a barrier: it completes once every rank has reached it."""
        _lib.hpuBarrier(self._stream(), self._handle)

    def send(self, tensor: Tensor, dst: int) -> None:
        """Sends tensor to rank `dst` (pairs that exchange both ways go inside :func:`group`)."""
        self._tensor("send", "tensor", tensor)
        _lib.hpuSend(self._stream(), self._handle, tensor.data_ptr(), tensor.numel(), tensor.dtype.value, dst)

    def recv(self, tensor: Tensor, src: int) -> Tensor:
        """Receives rank `src`'s send into tensor."""
        self._tensor("recv", "tensor", tensor)
        _lib.hpuRecv(self._stream(), self._handle, tensor.data_ptr(), tensor.numel(), tensor.dtype.value, src)
        return tensor

    # ---- life ------------------------------------------------------------------
    def synchronize(self) -> None:
        """Waits for the work queued on this rank's stream; raises a collective's error."""
        s = self._stream()
        if s is None:
            self.device.synchronize()
        else:
            _lib.hpuStreamSynchronize(s)

    def get_async_error(self) -> Optional[Exception]:
        """The communicator's sticky error as an HpuError, or None."""
        status = c_int()
        _lib.hpuCommGetAsyncError(self._handle, ctypes.byref(status))
        return error_for(status.value, _lib.last_error_message()) if status.value else None

    def abort(self) -> None:
        """Fails pending and future operations with AbortedError; safe from any thread."""
        _lib.hpuCommAbort(self._handle)

    def destroy(self) -> None:
        """Waits for queued operations, then releases the communicator. Idempotent."""
        if self._live:
            self._live = False
            _lib.hpuCommDestroy(self._handle)

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __del__(self) -> None:
        try:
            self.destroy()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<hpu.Comm rank {self.rank} of {self.world_size} on {self.device}>"


@contextmanager
def group() -> Iterator[None]:
    """Collectives and sends/receives inside the block are issued together at its end
    (hpuGroupStart/hpuGroupEnd): what lets two ranks send to each other."""
    _lib.hpuGroupStart()
    try:
        yield
    finally:
        _lib.hpuGroupEnd()
