"""The ops (Habana/ATen names), each with its backward, and the fused optimizer steps.

Every op checks its tensors' devices, shapes and dtypes here before calling
libhpu, queues the work on the thread's stream for the device (see
:func:`hpu.stream`; the device's default stream otherwise) and returns new
tensors. The calling thread's autocast region (:class:`hpu.autocast`) decides
the precision, as Habana's op lists say.
"""
from __future__ import annotations

import ctypes
import math
from ctypes import POINTER, c_double, c_int, c_int64
from typing import Callable, Optional, Sequence, Tuple, Union

from . import _lib, dtypes
from .dtypes import DTypeLike
from .errors import InvalidArgumentError
from .stream import stream_for
from .tensor import T, Tensor, tensor

__all__ = [
    "mm", "mm_backward", "bmm", "bmm_backward", "addmm", "addmm_backward", "matmul", "matmul_backward",
    "linear", "linear_backward", "add", "add_backward", "sub", "sub_backward", "mul", "mul_backward", "div",
    "div_backward", "add_", "exp", "exp_backward", "log", "log_backward", "tan", "tan_backward", "relu",
    "relu_backward", "gelu", "gelu_backward", "tanh", "tanh_backward", "sigmoid", "sigmoid_backward", "softmax",
    "softmax_backward", "log_softmax", "log_softmax_backward", "nll_loss", "nll_loss_backward", "cross_entropy",
    "cross_entropy_backward", "layer_norm", "layer_norm_backward", "dropout", "dropout_backward", "embedding",
    "embedding_backward", "sum", "sum_backward", "mean", "mean_backward", "argmax", "squared_norm", "cast",
    "cast_backward", "scale_", "sgd_step", "adamw_step",
]

Scalar = Union[int, float]
P = POINTER(T)


class SgdOptions_t(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("lr", c_double), ("momentum", c_double),
                ("dampening", c_double), ("weight_decay", c_double), ("nesterov", c_int)]


class AdamwOptions_t(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("lr", c_double), ("beta1", c_double), ("beta2", c_double),
                ("eps", c_double), ("weight_decay", c_double), ("param_copy", ctypes.c_void_p)]


_S = _lib.Status
_binary = [T, T, T, P]
_binary_bwd = [T, T, T, T, P, P]
_unary = [T, T, P]
_unary_bwd = [T, T, T, P]
_PROTOTYPES = {
    "hpuMm": _binary, "hpuMmBackward": _binary_bwd, "hpuBmm": _binary, "hpuBmmBackward": _binary_bwd,
    "hpuMatmul": _binary, "hpuMatmulBackward": _binary_bwd,
    "hpuAddmm": [T, T, T, T, c_double, c_double, P],
    "hpuAddmmBackward": [T, T, T, T, T, c_double, c_double, P, P, P],
    "hpuLinear": [T, T, T, T, P], "hpuLinearBackward": [T, T, T, T, P, P, P],
    "hpuAdd": _binary, "hpuAddBackward": _binary_bwd, "hpuSub": _binary, "hpuSubBackward": _binary_bwd,
    "hpuMul": _binary, "hpuMulBackward": _binary_bwd, "hpuDiv": _binary, "hpuDivBackward": _binary_bwd,
    "hpuAddInplace": [T, T, c_double, T],
    "hpuSoftmax": [T, T, c_int, P], "hpuSoftmaxBackward": [T, T, T, c_int, c_int, P],
    "hpuLogSoftmax": [T, T, c_int, P], "hpuLogSoftmaxBackward": [T, T, T, c_int, c_int, P],
    "hpuNllLoss": [T, T, T, c_int, c_int64, P], "hpuNllLossBackward": [T, T, T, T, c_int, c_int64, P],
    "hpuCrossEntropyLoss": [T, T, T, c_int, c_int64, P],
    "hpuCrossEntropyLossBackward": [T, T, T, T, c_int, c_int64, P],
    "hpuNllLossWeighted": [T, T, T, T, c_int, c_int64, P],
    "hpuNllLossWeightedBackward": [T, T, T, T, T, c_int, c_int64, P],
    "hpuCrossEntropyLossWeighted": [T, T, T, T, c_int, c_int64, P],
    "hpuCrossEntropyLossWeightedBackward": [T, T, T, T, T, c_int, c_int64, P],
    "hpuCrossEntropyLossSmoothed": [T, T, T, T, c_int, c_int64, c_double, P],
    "hpuCrossEntropyLossSmoothedBackward": [T, T, T, T, T, c_int, c_int64, c_double, P],
    "hpuLayerNormNd": [T, T, c_int, T, T, c_double, P, P, P],
    "hpuLayerNormBackward": [T, T, T, T, T, T, P, P, P],
    "hpuDropout": [T, T, c_double, c_int, P, P], "hpuDropoutBackward": [T, T, T, c_double, c_int, P],
    "hpuEmbedding": [T, T, T, c_int64, P], "hpuEmbeddingBackward": [T, T, T, T, c_int64, P],
    "hpuSum": [T, T, POINTER(c_int), c_int, c_int, P], "hpuSumBackward": [T, T, T, POINTER(c_int), c_int, c_int, P],
    "hpuMean": [T, T, POINTER(c_int), c_int, c_int, P],
    "hpuMeanBackward": [T, T, T, POINTER(c_int), c_int, c_int, P],
    "hpuCast": [T, T, c_int, P], "hpuCastBackward": [T, T, T, P],
    "hpuArgmax": [T, T, c_int, c_int, P], "hpuSquaredNorm": [T, POINTER(T), ctypes.c_size_t, P],
    "hpuScaleInplace": [T, T, c_double],
    "hpuSgdStep": [T, T, T, T, c_int64, POINTER(SgdOptions_t)],
    "hpuAdamwStep": [T, T, T, T, T, c_int64, POINTER(AdamwOptions_t)],
}
_UNARY = ("exp", "log", "tan", "relu", "gelu", "tanh", "sigmoid")
for _name in _UNARY:
    _c = "hpu" + _name.capitalize()
    _PROTOTYPES[_c], _PROTOTYPES[_c + "Backward"] = _unary, _unary_bwd
_lib._declare({name: (_S, args) for name, args in _PROTOTYPES.items()})

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


# ---- checks made before the call ------------------------------------------------
def _tensors(op: str, **named: Optional[Tensor]) -> int:
    """Checks that the named arguments are tensors on one device; returns its index."""
    device = None
    for name, t in named.items():
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be an hpu.Tensor, not {type(t).__name__}")
        if device is None:
            device, first = t.device, name
        elif t.device != device:
            raise InvalidArgumentError(f"{op}: {name} is on {t.device} but {first} on {device}; "
                                       "an op's tensors share a device")
    if device is None:
        raise InvalidArgumentError(f"{op}: no tensor argument")
    return device.index


def _floating(op: str, **named: Optional[Tensor]) -> None:
    for name, t in named.items():
        if t is not None and not t.dtype.is_floating_point:
            raise InvalidArgumentError(f"{op}: {name} has dtype {t.dtype!r}; a floating type is needed")


def _ndim(op: str, name: str, t: Tensor, *allowed: int) -> None:
    if t.ndim not in allowed:
        want = " or ".join(str(n) for n in allowed)
        raise InvalidArgumentError(f"{op}: {name} has shape {t.shape} ({t.ndim} dims); {want} dims are needed")


def _same(op: str, what: str, a: Tuple[str, int], b: Tuple[str, int]) -> None:
    if a[1] != b[1]:
        raise InvalidArgumentError(f"{op}: {what}: {a[0]} is {a[1]} but {b[0]} is {b[1]}")


def _indices(op: str, name: str, t: Tensor) -> None:
    if t.dtype not in (dtypes.int32, dtypes.int64):
        raise InvalidArgumentError(f"{op}: {name} has dtype {t.dtype!r}; hpu.int32 or hpu.int64 is needed")


def _broadcast(op: str, a: Tensor, b: Tensor) -> None:
    for x, y in zip(reversed(a.shape), reversed(b.shape)):
        if x != y and x != 1 and y != 1:
            raise InvalidArgumentError(f"{op}: shapes {a.shape} and {b.shape} do not broadcast")


def _dim(op: str, x: Tensor, dim: int) -> int:
    n = max(x.ndim, 1)
    if not isinstance(dim, int) or not -n <= dim < n:
        raise InvalidArgumentError(f"{op}: dim {dim!r} is out of range for shape {x.shape}")
    return dim


def _grad(op: str, grad: Tensor, shape: Tuple[int, ...], of: str) -> None:
    if grad.shape != shape:
        raise InvalidArgumentError(f"{op}: the gradient has shape {grad.shape}; {of} has {shape}")


# ---- calling ----------------------------------------------------------------------
def _call(cname: str, device: int, *args: object, outs: Sequence[bool] = (True,)) -> Tuple[Optional[Tensor], ...]:
    """Calls cname(stream, *args, &out...) and wraps each requested output (False: pass NULL)."""
    handles = [T() if wanted else None for wanted in outs]
    getattr(_lib, cname)(stream_for(device), *args, *(ctypes.byref(h) if h is not None else None for h in handles))
    return tuple(Tensor(h.value) if h is not None else None for h in handles)


def _h(t: Optional[Tensor]) -> Optional[int]:
    return t.handle if t is not None else None


def _operand(x: Union[Tensor, Scalar], like: Tensor) -> Tensor:
    """A scalar operand becomes a 0-dim tensor of the other operand's dtype and device."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return tensor(x, dtype=like.dtype, device=like.device)
    raise TypeError(f"operand must be an hpu.Tensor or a number, not {type(x).__name__}")


# ---- matrix products --------------------------------------------------------------
def _check_mm(op: str, a: Tensor, b: Tensor) -> int:
    dev = _tensors(op, a=a, b=b)
    _floating(op, a=a, b=b)
    _ndim(op, "a", a, 2)
    _ndim(op, "b", b, 2)
    _same(op, "inner dims differ", ("a.shape[1]", a.shape[1]), ("b.shape[0]", b.shape[0]))
    return dev


def mm(a: Tensor, b: Tensor) -> Tensor:
    """a[m,k] @ b[k,n]."""
    return _call("hpuMm", _check_mm("mm", a, b), a.handle, b.handle)[0]


def mm_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`mm`."""
    dev = _check_mm("mm_backward", a, b)
    _tensors("mm_backward", grad=grad, a=a)
    _grad("mm_backward", grad, (a.shape[0], b.shape[1]), "a @ b")
    return _call("hpuMmBackward", dev, grad.handle, a.handle, b.handle, outs=(True, True))


def _check_bmm(op: str, a: Tensor, b: Tensor) -> int:
    dev = _tensors(op, a=a, b=b)
    _floating(op, a=a, b=b)
    _ndim(op, "a", a, 3)
    _ndim(op, "b", b, 3)
    _same(op, "batch sizes differ", ("a.shape[0]", a.shape[0]), ("b.shape[0]", b.shape[0]))
    _same(op, "inner dims differ", ("a.shape[2]", a.shape[2]), ("b.shape[1]", b.shape[1]))
    return dev


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """a[B,m,k] @ b[B,k,n]."""
    return _call("hpuBmm", _check_bmm("bmm", a, b), a.handle, b.handle)[0]


def bmm_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`bmm`."""
    dev = _check_bmm("bmm_backward", a, b)
    _tensors("bmm_backward", grad=grad, a=a)
    _grad("bmm_backward", grad, (a.shape[0], a.shape[1], b.shape[2]), "a @ b")
    return _call("hpuBmmBackward", dev, grad.handle, a.handle, b.handle, outs=(True, True))


def _check_addmm(op: str, bias: Tensor, a: Tensor, b: Tensor) -> int:
    dev = _check_mm(op, a, b)
    _tensors(op, bias=bias, a=a)
    _floating(op, bias=bias)
    if bias.shape not in ((b.shape[1],), (a.shape[0], b.shape[1])):
        raise InvalidArgumentError(f"{op}: bias has shape {bias.shape}; ({b.shape[1]},) or "
                                   f"({a.shape[0]}, {b.shape[1]}) is needed")
    return dev


def addmm(bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """beta bias + alpha a @ b."""
    return _call("hpuAddmm", _check_addmm("addmm", bias, a, b), bias.handle, a.handle, b.handle, beta, alpha)[0]


def addmm_backward(grad: Tensor, bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1.0,
                   alpha: float = 1.0) -> Tuple[Tensor, Tensor, Tensor]:
    """(grad_bias, grad_a, grad_b) of :func:`addmm`."""
    dev = _check_addmm("addmm_backward", bias, a, b)
    _tensors("addmm_backward", grad=grad, a=a)
    _grad("addmm_backward", grad, (a.shape[0], b.shape[1]), "the output")
    return _call("hpuAddmmBackward", dev, grad.handle, bias.handle, a.handle, b.handle, beta, alpha,
                 outs=(True, True, True))


def _check_matmul(op: str, a: Tensor, b: Tensor) -> int:
    dev = _tensors(op, a=a, b=b)
    _floating(op, a=a, b=b)
    if a.ndim == 0 or b.ndim == 0:
        raise InvalidArgumentError(f"{op}: a {a.shape} and b {b.shape} need at least 1 dim each")
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    _same(op, "inner dims differ", ("a.shape[-1]", a.shape[-1]), ("the contracted dim of b", k_b))
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    if batch_a and batch_b and batch_a != batch_b:
        raise InvalidArgumentError(f"{op}: batch dims {batch_a} and {batch_b} differ")
    return dev


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul: 1-dim, 2-dim and batched operands."""
    return _call("hpuMatmul", _check_matmul("matmul", a, b), a.handle, b.handle)[0]


def matmul_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`matmul`, each summed over the batch dims it was broadcast along."""
    dev = _check_matmul("matmul_backward", a, b)
    _tensors("matmul_backward", grad=grad, a=a)
    return _call("hpuMatmulBackward", dev, grad.handle, a.handle, b.handle, outs=(True, True))


def _check_linear(op: str, x: Tensor, w: Tensor, bias: Optional[Tensor]) -> int:
    dev = _tensors(op, x=x, w=w, bias=bias)
    _floating(op, x=x, w=w, bias=bias)
    _ndim(op, "w", w, 2)
    if x.ndim == 0:
        raise InvalidArgumentError(f"{op}: x needs at least 1 dim")
    _same(op, "in_features differ", ("x.shape[-1]", x.shape[-1]), ("w.shape[1]", w.shape[1]))
    if bias is not None and bias.shape != (w.shape[0],):
        raise InvalidArgumentError(f"{op}: bias has shape {bias.shape}; ({w.shape[0]},) is needed")
    return dev


def linear(x: Tensor, w: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """x @ w.T + bias (torch.nn.functional.linear)."""
    return _call("hpuLinear", _check_linear("linear", x, w, bias), x.handle, w.handle, _h(bias))[0]


def linear_backward(grad: Tensor, x: Tensor, w: Tensor,
                    bias: bool = True) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """(grad_x, grad_w, grad_bias) of :func:`linear`; grad_bias is None when `bias` is False."""
    dev = _check_linear("linear_backward", x, w, None)
    _tensors("linear_backward", grad=grad, x=x)
    _grad("linear_backward", grad, x.shape[:-1] + (w.shape[0],), "the output")
    return _call("hpuLinearBackward", dev, grad.handle, x.handle, w.handle, outs=(True, True, bias))


# ---- elementwise --------------------------------------------------------------------
def _binary_op(op: str, cname: str) -> Tuple[Callable[..., Tensor], Callable[..., Tuple[Tensor, Tensor]]]:
    def forward(a: Union[Tensor, Scalar], b: Union[Tensor, Scalar]) -> Tensor:
        if not isinstance(a, Tensor):
            a = _operand(a, b if isinstance(b, Tensor) else tensor(b))
        b = _operand(b, a)
        dev = _tensors(op, a=a, b=b)
        _broadcast(op, a, b)
        return _call(cname, dev, a.handle, b.handle)[0]

    def backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        dev = _tensors(op + "_backward", grad=grad, a=a, b=b)
        _broadcast(op + "_backward", a, b)
        return _call(cname + "Backward", dev, grad.handle, a.handle, b.handle, outs=(True, True))

    forward.__name__, backward.__name__ = op, op + "_backward"
    forward.__doc__ = f"Elementwise {op} with numpy broadcasting, in the wider of the two dtypes."
    backward.__doc__ = f"(grad_a, grad_b) of :func:`{op}`, summed back to each input's shape."
    return forward, backward


add, add_backward = _binary_op("add", "hpuAdd")
sub, sub_backward = _binary_op("sub", "hpuSub")
mul, mul_backward = _binary_op("mul", "hpuMul")
div, div_backward = _binary_op("div", "hpuDiv")


def add_(dst: Tensor, src: Tensor, alpha: float = 1.0) -> Tensor:
    """dst += alpha src in place (gradient accumulation); returns dst."""
    dev = _tensors("add_", dst=dst, src=src)
    _floating("add_", dst=dst, src=src)
    _same("add_", "shapes differ", ("dst", dst.shape), ("src", src.shape))  # type: ignore[arg-type]
    _lib.hpuAddInplace(stream_for(dev), src.handle, alpha, dst.handle)
    return dst


def _unary_op(op: str) -> Tuple[Callable[[Tensor], Tensor], Callable[[Tensor, Tensor], Tensor]]:
    cname = "hpu" + op.capitalize()

    def forward(x: Tensor) -> Tensor:
        dev = _tensors(op, x=x)
        _floating(op, x=x)
        return _call(cname, dev, x.handle)[0]

    def backward(grad: Tensor, x: Tensor) -> Tensor:
        dev = _tensors(op + "_backward", grad=grad, x=x)
        _grad(op + "_backward", grad, x.shape, "x")
        return _call(cname + "Backward", dev, grad.handle, x.handle)[0]

    forward.__name__, backward.__name__ = op, op + "_backward"
    forward.__doc__ = f"Elementwise {op} of a floating tensor."
    backward.__doc__ = f"grad_x of :func:`{op}` (takes the forward's input)."
    return forward, backward


exp, exp_backward = _unary_op("exp")
log, log_backward = _unary_op("log")
tan, tan_backward = _unary_op("tan")
relu, relu_backward = _unary_op("relu")
gelu, gelu_backward = _unary_op("gelu")
tanh, tanh_backward = _unary_op("tanh")
sigmoid, sigmoid_backward = _unary_op("sigmoid")


# ---- normalisation and losses -----------------------------------------------------------
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along `dim`."""
    dev = _tensors("softmax", x=x)
    _floating("softmax", x=x)
    return _call("hpuSoftmax", dev, x.handle, _dim("softmax", x, dim))[0]


def softmax_backward(grad: Tensor, out: Tensor, dim: int = -1, input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`softmax` from its output; grad_x has `input_dtype` (out's by default)."""
    dev = _tensors("softmax_backward", grad=grad, out=out)
    _grad("softmax_backward", grad, out.shape, "out")
    dt = dtypes.resolve(input_dtype) if input_dtype is not None else out.dtype
    return _call("hpuSoftmaxBackward", dev, grad.handle, out.handle, _dim("softmax_backward", out, dim), dt.value)[0]


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log(softmax(x)) along `dim`, computed stably."""
    dev = _tensors("log_softmax", x=x)
    _floating("log_softmax", x=x)
    return _call("hpuLogSoftmax", dev, x.handle, _dim("log_softmax", x, dim))[0]


def log_softmax_backward(grad: Tensor, out: Tensor, dim: int = -1,
                         input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`log_softmax` from its output; grad_x has `input_dtype` (out's by default)."""
    dev = _tensors("log_softmax_backward", grad=grad, out=out)
    _grad("log_softmax_backward", grad, out.shape, "out")
    dt = dtypes.resolve(input_dtype) if input_dtype is not None else out.dtype
    return _call("hpuLogSoftmaxBackward", dev, grad.handle, out.handle, _dim("log_softmax_backward", out, dim),
                 dt.value)[0]


def _check_loss(op: str, input: Tensor, target: Tensor, reduction: str, ignore_index: int,
                weight: Optional[Tensor], label_smoothing: float = 0.0,
                probabilities: bool = False) -> Tuple[int, int, Tuple[int, ...]]:
    """Checks a loss's arguments (a floating target holds class probabilities where
    `probabilities` allows them); returns (device, reduction's value, the loss's shape)."""
    dev = _tensors(op, input=input, target=target, weight=weight)
    _floating(op, input=input, weight=weight)
    probs = probabilities and target.dtype.is_floating_point
    if not probs and target.dtype not in (dtypes.int32, dtypes.int64):
        also = " (class indices) or a floating type (class probabilities)" if probabilities else ""
        raise InvalidArgumentError(f"{op}: target has dtype {target.dtype!r}; hpu.int32 or hpu.int64{also} is needed")
    if input.ndim == 0:
        raise InvalidArgumentError(f"{op}: input is 0-dim; [C], [N, C] or [N, C, d1, ...] is needed")
    classes = input.shape[0] if input.ndim == 1 else input.shape[1]
    per_sample = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    if probs and target.shape != input.shape:
        raise InvalidArgumentError(f"{op}: target has shape {target.shape}; {input.shape} is needed "
                                   f"(class probabilities have input's shape)")
    if not probs and target.shape != per_sample:
        raise InvalidArgumentError(f"{op}: target has shape {target.shape}; {per_sample} is needed "
                                   f"(input {input.shape} without its class dim)")
    if weight is not None and weight.shape != (classes,):
        raise InvalidArgumentError(f"{op}: weight has shape {weight.shape}; ({classes},) is needed "
                                   "(one weight per class of input)")
    if reduction not in _REDUCTIONS:
        raise InvalidArgumentError(f"{op}: reduction {reduction!r} is not 'none', 'mean' or 'sum'")
    if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
        raise InvalidArgumentError(f"{op}: ignore_index {ignore_index!r} is not an int")
    if not isinstance(label_smoothing, (int, float)) or isinstance(label_smoothing, bool) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise InvalidArgumentError(f"{op}: label_smoothing {label_smoothing!r} is not in [0, 1]")
    return dev, _REDUCTIONS[reduction], per_sample if reduction == "none" else ()


def _loss(op: str, cname: str, input: Tensor, target: Tensor, reduction: str, ignore_index: int,
          weight: Optional[Tensor], label_smoothing: float = 0.0) -> Tensor:
    probabilities = cname == "hpuCrossEntropyLoss"
    dev, red, _ = _check_loss(op, input, target, reduction, ignore_index, weight, label_smoothing, probabilities)
    if label_smoothing:
        return _call(cname + "Smoothed", dev, input.handle, target.handle, _h(weight), red, ignore_index,
                     label_smoothing)[0]
    if weight is None:
        return _call(cname, dev, input.handle, target.handle, red, ignore_index)[0]
    return _call(cname + "Weighted", dev, input.handle, target.handle, weight.handle, red, ignore_index)[0]


def _loss_backward(op: str, cname: str, grad: Tensor, input: Tensor, target: Tensor, reduction: str,
                   ignore_index: int, weight: Optional[Tensor], label_smoothing: float = 0.0) -> Tensor:
    probabilities = cname == "hpuCrossEntropyLoss"
    dev, red, shape = _check_loss(op, input, target, reduction, ignore_index, weight, label_smoothing, probabilities)
    _tensors(op, grad=grad, input=input)
    _grad(op, grad, shape, "the loss")
    args = (grad.handle, input.handle, target.handle)
    if label_smoothing:
        return _call(cname + "SmoothedBackward", dev, *args, _h(weight), red, ignore_index, label_smoothing)[0]
    if weight is None:
        return _call(cname + "Backward", dev, *args, red, ignore_index)[0]
    return _call(cname + "WeightedBackward", dev, *args, weight.handle, red, ignore_index)[0]


def nll_loss(input: Tensor, target: Tensor, reduction: str = "mean", ignore_index: int = -100, *,
             weight: Optional[Tensor] = None) -> Tensor:
    """Negative log-likelihood of log-probabilities input[N, C] at class indices target[N]
    (also one sample, input [C] and target 0-dim, or spatial, input [N, C, d1, ...] and
    target [N, d1, ...], as torch.nn.functional.nll_loss).

    With `weight` (a floating tensor [C], torch's class weights), sample i's loss is scaled
    by weight[target[i]] and ``"mean"`` divides by the sum of the counted samples' weights.
    Samples whose target is `ignore_index` count nothing. The loss has target's shape for
    ``"none"``, else it is 0-dim."""
    return _loss("nll_loss", "hpuNllLoss", input, target, reduction, ignore_index, weight)


def nll_loss_backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str = "mean",
                      ignore_index: int = -100, *, weight: Optional[Tensor] = None) -> Tensor:
    """grad_input of :func:`nll_loss`; `grad` has the loss's shape."""
    return _loss_backward("nll_loss_backward", "hpuNllLoss", grad, input, target, reduction, ignore_index, weight)


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean", ignore_index: int = -100, *,
                  weight: Optional[Tensor] = None, label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim then nll_loss, fused (torch.nn.functional.cross_entropy;
    Habana's cross_entropy_loss for autocast); shapes and `weight` as in :func:`nll_loss`.
    `label_smoothing` e in [0, 1] mixes in e / C of every class's loss, as torch does.

    A floating `target` of input's shape holds class probabilities (torch's soft targets):
    sample i's loss is sum_j weight[j] * q[i, j] * -log_softmax(input)[i, j] with
    q = (1 - e) * target + e / C; `ignore_index` plays no part and ``"mean"`` divides by
    the number of samples."""
    return _loss("cross_entropy", "hpuCrossEntropyLoss", input, target, reduction, ignore_index, weight,
                 label_smoothing)


def cross_entropy_backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str = "mean",
                           ignore_index: int = -100, *, weight: Optional[Tensor] = None,
                           label_smoothing: float = 0.0) -> Tensor:
    """grad_input of :func:`cross_entropy`."""
    return _loss_backward("cross_entropy_backward", "hpuCrossEntropyLoss", grad, input, target, reduction,
                          ignore_index, weight, label_smoothing)


def _normalized_ndim(op: str, x: Tensor, normalized_shape: Union[None, int, Sequence[int]]) -> int:
    """How many trailing dims of x `normalized_shape` names (torch's: x's shape from there)."""
    if x.ndim == 0:
        raise InvalidArgumentError(f"{op}: x needs at least 1 dim")
    if normalized_shape is None:
        return 1
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not 1 <= len(shape) <= x.ndim or x.shape[x.ndim - len(shape):] != shape:
        raise InvalidArgumentError(f"{op}: normalized_shape {shape} is not a non-empty tail of x's shape {x.shape}")
    return len(shape)


def _check_params(op: str, x: Tensor, k: int, **params: Optional[Tensor]) -> None:
    """weight and bias have the shape of x's last k (normalized) dims."""
    want = x.shape[x.ndim - k:]
    for name, t in params.items():
        if t is not None and t.shape != want:
            raise InvalidArgumentError(f"{op}: {name} has shape {t.shape}; {want} (x's normalized dims) is needed")


def layer_norm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5,
               return_stats: bool = False, *, normalized_shape: Union[None, int, Sequence[int]] = None
               ) -> Union[Tensor, Tuple[Tensor, Tensor, Tensor]]:
    """Layer normalisation over the last dim, or over the trailing dims `normalized_shape`
    names (torch.nn.functional.layer_norm's; x's shape from some dim on). weight and bias
    have those dims' shape. With `return_stats`, (y, mean, rstd) for the backward: mean and
    rstd are float32 of x's shape without the normalized dims."""
    dev = _tensors("layer_norm", x=x, weight=weight, bias=bias)
    _floating("layer_norm", x=x, weight=weight, bias=bias)
    k = _normalized_ndim("layer_norm", x, normalized_shape)
    _check_params("layer_norm", x, k, weight=weight, bias=bias)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 <= eps < math.inf:
        raise InvalidArgumentError(f"layer_norm: eps {eps!r} is not a finite number >= 0")
    y, mean_, rstd = _call("hpuLayerNormNd", dev, x.handle, k, _h(weight), _h(bias), eps,
                           outs=(True, return_stats, return_stats))
    return (y, mean_, rstd) if return_stats else y


def layer_norm_backward(grad: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, weight: Optional[Tensor] = None,
                        bias: bool = True) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """(grad_x, grad_weight, grad_bias) of :func:`layer_norm` (None where there is no weight);
    the normalized dims are those of x that `mean` lacks."""
    dev = _tensors("layer_norm_backward", grad=grad, x=x, mean=mean, rstd=rstd, weight=weight)
    _floating("layer_norm_backward", grad=grad, x=x, weight=weight)
    _grad("layer_norm_backward", grad, x.shape, "x")
    k = x.ndim - mean.ndim
    if x.ndim == 0 or k < 1 or mean.shape != x.shape[:mean.ndim]:
        raise InvalidArgumentError(f"layer_norm_backward: mean has shape {mean.shape}; x's shape {x.shape} without "
                                   "its normalized dims is needed (layer_norm's return_stats)")
    _check_params("layer_norm_backward", x, k, weight=weight)
    affine = weight is not None
    return _call("hpuLayerNormBackward", dev, grad.handle, x.handle, mean.handle, rstd.handle, _h(weight),
                 outs=(True, affine, affine and bias))


def dropout(x: Tensor, p: float = 0.5, training: bool = True,
            return_mask: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Zeroes each element with probability p and scales the rest by 1/(1-p) (when training);
    with `return_mask`, (out, mask) where mask is uint8, 1 = kept."""
    dev = _tensors("dropout", x=x)
    _floating("dropout", x=x)
    if not 0.0 <= p < 1.0:
        raise InvalidArgumentError(f"dropout: p {p!r} is not in [0, 1)")
    out, mask = _call("hpuDropout", dev, x.handle, p, int(training), outs=(True, return_mask))
    return (out, mask) if return_mask else out


def dropout_backward(grad: Tensor, mask: Tensor, p: float, input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`dropout`: grad masked and scaled as the forward was; of `input_dtype` (grad's by default)."""
    dev = _tensors("dropout_backward", grad=grad, mask=mask)
    _grad("dropout_backward", grad, mask.shape, "mask")
    dt = dtypes.resolve(input_dtype) if input_dtype is not None else grad.dtype
    return _call("hpuDropoutBackward", dev, grad.handle, mask.handle, p, dt.value)[0]


def _check_embedding(op: str, indices: Tensor, weight: Tensor) -> int:
    dev = _tensors(op, indices=indices, weight=weight)
    _indices(op, "indices", indices)
    _ndim(op, "weight", weight, 2)
    _floating(op, weight=weight)
    return dev


def embedding(indices: Tensor, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """Rows of weight[V, D] at `indices` (torch.nn.functional.embedding's argument order)."""
    dev = _check_embedding("embedding", indices, weight)
    return _call("hpuEmbedding", dev, weight.handle, indices.handle, -1 if padding_idx is None else padding_idx)[0]


def embedding_backward(grad: Tensor, indices: Tensor, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """grad_weight of :func:`embedding`: each row of grad added to its index's row (none to padding_idx)."""
    dev = _check_embedding("embedding_backward", indices, weight)
    _tensors("embedding_backward", grad=grad, weight=weight)
    _grad("embedding_backward", grad, indices.shape + (weight.shape[1],), "the output")
    return _call("hpuEmbeddingBackward", dev, grad.handle, indices.handle, weight.handle,
                 -1 if padding_idx is None else padding_idx)[0]


# ---- reductions and casts -----------------------------------------------------------
def _dims(op: str, x: Tensor, dim: Union[None, int, Sequence[int]]) -> Tuple["ctypes.Array", int]:
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    seen = set()
    for d in dims:
        _dim(op, x, d)
        if d % max(x.ndim, 1) in seen:
            raise InvalidArgumentError(f"{op}: dim {d} is listed twice in {dims}")
        seen.add(d % max(x.ndim, 1))
    return (c_int * max(1, len(dims)))(*dims), len(dims)


def _reduce(op: str, cname: str, x: Tensor, dim: Union[None, int, Sequence[int]], keepdim: bool) -> Tensor:
    dev = _tensors(op, x=x)
    if op == "mean":
        _floating(op, x=x)
    dims, n = _dims(op, x, dim)
    return _call(cname, dev, x.handle, dims, n, int(keepdim))[0]


def sum(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Sum over `dim` (all dims by default); integer sums are int64."""
    return _reduce("sum", "hpuSum", x, dim, keepdim)


def mean(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Mean over `dim` (all dims by default) of a floating tensor."""
    return _reduce("mean", "hpuMean", x, dim, keepdim)


def _reduce_backward(op: str, grad: Tensor, x: Tensor, dim: Union[None, int, Sequence[int]],
                     keepdim: bool) -> Tensor:
    dev = _tensors(op + "_backward", grad=grad, x=x)
    dims, n = _dims(op + "_backward", x, dim)
    return _call("hpu" + op.capitalize() + "Backward", dev, grad.handle, x.handle, dims, n, int(keepdim))[0]


def sum_backward(grad: Tensor, x: Tensor, dim: Union[None, int, Sequence[int]] = None,
                 keepdim: bool = False) -> Tensor:
    """grad_x of :func:`sum`: grad broadcast back to x's shape."""
    return _reduce_backward("sum", grad, x, dim, keepdim)


def mean_backward(grad: Tensor, x: Tensor, dim: Union[None, int, Sequence[int]] = None,
                  keepdim: bool = False) -> Tensor:
    """grad_x of :func:`mean`: grad broadcast back to x's shape, divided by the count averaged."""
    return _reduce_backward("mean", grad, x, dim, keepdim)


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """int64 index of the largest element along `dim` (of the flattened tensor when None),
    the first on ties; a NaN counts as largest (torch.argmax)."""
    dev = _tensors("argmax", x=x)
    if x.dtype is dtypes.bool_:
        raise InvalidArgumentError("argmax: x has dtype hpu.bool_; a number type is needed")
    if dim is None:
        if x.numel() == 0:
            raise InvalidArgumentError(f"argmax: x of shape {x.shape} has no elements")
        flat = x.reshape(-1)  # kept alive through the call
        index = _call("hpuArgmax", dev, flat.handle, 0, 0)[0]
        return index.reshape(*([1] * x.ndim)) if keepdim else index
    if x.ndim > 0 and x.shape[_dim("argmax", x, dim)] == 0:
        raise InvalidArgumentError(f"argmax: dim {dim} of shape {x.shape} is empty")
    return _call("hpuArgmax", dev, x.handle, _dim("argmax", x, dim), int(keepdim))[0]


def squared_norm(tensors: Sequence[Tensor]) -> Tensor:
    """The sum of x**2 over every element of `tensors` (floating, on one device), as a float32
    0-dim tensor; its square root is the total norm of gradient clipping. The same bits on
    every run."""
    ts = list(tensors) if not isinstance(tensors, Tensor) else [tensors]
    if not ts:
        raise InvalidArgumentError("squared_norm: tensors is empty; at least one tensor is needed")
    named = {f"tensors[{i}]": t for i, t in enumerate(ts)}
    dev = _tensors("squared_norm", **named)
    _floating("squared_norm", **named)
    handles = (T * len(ts))(*(t.handle for t in ts))
    return _call("hpuSquaredNorm", dev, handles, len(ts))[0]


def scale_(x: Tensor, alpha: float) -> Tensor:
    """x *= alpha in place (a contiguous floating tensor); returns x."""
    dev = _tensors("scale_", x=x)
    _floating("scale_", x=x)
    if not x.is_contiguous():
        raise InvalidArgumentError(f"scale_: x (shape {x.shape}, strides {x.stride()}) is not contiguous")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise TypeError(f"scale_: alpha must be a number, not {type(alpha).__name__}")
    _lib.hpuScaleInplace(stream_for(dev), x.handle, alpha)
    return x


def cast(x: Tensor, dtype: DTypeLike) -> Tensor:
    """A new contiguous tensor of x converted to `dtype` (an op: it runs in stream order)."""
    dev = _tensors("cast", x=x)
    return _call("hpuCast", dev, x.handle, dtypes.resolve(dtype).value)[0]


def cast_backward(grad: Tensor, x: Tensor) -> Tensor:
    """grad_x of :func:`cast`: grad converted to x's dtype."""
    dev = _tensors("cast_backward", grad=grad, x=x)
    _grad("cast_backward", grad, x.shape, "x")
    return _call("hpuCastBackward", dev, grad.handle, x.handle)[0]


# ---- optimizer steps ------------------------------------------------------------------
def _check_step(op: str, param: Tensor, grad: Tensor, step: int, **state: Optional[Tensor]) -> int:
    dev = _tensors(op, param=param, grad=grad, **state)
    if param.dtype is not dtypes.float32:
        raise InvalidArgumentError(f"{op}: param has dtype {param.dtype!r}; hpu.float32 master weights are needed")
    _floating(op, grad=grad)
    for name, t in (("grad", grad), *state.items()):
        if t is not None and t.shape != param.shape:
            raise InvalidArgumentError(f"{op}: {name} has shape {t.shape}; param has {param.shape}")
    if not isinstance(step, int) or step < 1:
        raise InvalidArgumentError(f"{op}: step {step!r} is not an int >= 1")
    return dev


def sgd_step(param: Tensor, grad: Tensor, momentum_buffer: Optional[Tensor] = None, *, step: int, lr: float = 0.01,
             momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
             nesterov: bool = False) -> None:
    """One torch.optim.SGD step on `param`, in place."""
    dev = _check_step("sgd_step", param, grad, step, momentum_buffer=momentum_buffer)
    if momentum and momentum_buffer is None:
        raise InvalidArgumentError(f"sgd_step: momentum {momentum} needs a momentum_buffer")
    opts = _lib.sized(SgdOptions_t)
    opts.lr, opts.momentum, opts.dampening, opts.weight_decay, opts.nesterov = \
        lr, momentum, dampening, weight_decay, int(nesterov)
    _lib.hpuSgdStep(stream_for(dev), param.handle, grad.handle, _h(momentum_buffer), step, ctypes.byref(opts))


def _adamw_options(lr: float, betas: Tuple[float, float], eps: float, weight_decay: float) -> AdamwOptions_t:
    opts = _lib.sized(AdamwOptions_t)
    opts.lr, (opts.beta1, opts.beta2), opts.eps, opts.weight_decay = lr, betas, eps, weight_decay
    return opts


def adamw_step(param: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, step: int, lr: float = 1e-3,
               betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
               param_copy: Optional[Tensor] = None) -> None:
    """One torch.optim.AdamW step on `param`, in place. With `param_copy` (bf16 or f16, param's shape), the
    same pass also writes the new `param` converted to its dtype, as :func:`cast` would."""
    dev = _check_step("adamw_step", param, grad, step, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, param_copy=param_copy)
    opts = _adamw_options(lr, betas, eps, weight_decay)
    opts.param_copy = _h(param_copy)
    _lib.hpuAdamwStep(stream_for(dev), param.handle, grad.handle, exp_avg.handle, exp_avg_sq.handle, step,
                      ctypes.byref(opts))


# ---- Tensor methods and operators ---------------------------------------------------------
def _methods() -> None:
    Tensor.__add__ = lambda a, b: add(a, b)
    Tensor.__radd__ = lambda a, b: add(b, a)
    Tensor.__sub__ = lambda a, b: sub(a, b)
    Tensor.__rsub__ = lambda a, b: sub(b, a)
    Tensor.__mul__ = lambda a, b: mul(a, b)
    Tensor.__rmul__ = lambda a, b: mul(b, a)
    Tensor.__truediv__ = lambda a, b: div(a, b)
    Tensor.__rtruediv__ = lambda a, b: div(b, a)
    Tensor.__matmul__ = lambda a, b: matmul(a, b)
    Tensor.__neg__ = lambda a: mul(a, -1)

    def add_method(self: Tensor, other: Tensor, alpha: float = 1.0) -> Tensor:
        """self += alpha other in place (:func:`add_`); returns self."""
        return add_(self, other, alpha)

    def mul_method(self: Tensor, alpha: float) -> Tensor:
        """self *= alpha (a number) in place (:func:`scale_`); returns self."""
        return scale_(self, alpha)

    add_method.__name__, mul_method.__name__ = "add_", "mul_"
    Tensor.add_, Tensor.mul_ = add_method, mul_method
    for name in ("mm", "bmm", "matmul", "exp", "log", "tan", "relu", "gelu", "tanh", "sigmoid", "softmax",
                 "log_softmax", "sum", "mean", "argmax"):
        setattr(Tensor, name, globals()[name])


_methods()
