"""The ops (Habana/ATen names), each with its backward, and the fused optimizer steps.

Every op calls libhpu, which checks the tensors' devices, shapes and dtypes
(a failure raises the exception of its status, with libhpu's message naming
the C argument), queues the work on the thread's stream for the device (see
:func:`hpu.stream`; the device's default stream otherwise) and returns new
tensors. The calling thread's autocast region (:class:`hpu.autocast`) decides
the precision, as Habana's op lists say.
"""
from __future__ import annotations

import ctypes
from ctypes import c_int
from typing import Callable, Optional, Sequence, Tuple, Union

from . import _abi, _lib, dtypes
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


_REDUCTIONS = {"none": _abi.HPU_REDUCTION_NONE, "mean": _abi.HPU_REDUCTION_MEAN, "sum": _abi.HPU_REDUCTION_SUM}


# ---- calling ------------------------------------------------------------------------
# libhpu checks every argument (devices, shapes, dtypes, ranges) and names the
# one it rejects; its status and message become the exception, so errors read
# the same as in C and in every binding. The wrappers here only turn Python
# values into C ones: _call takes one argument per C parameter after the
# stream, tensors as they are, OUT for an output the op returns and NO_OUT for
# one not wanted (NULL).
OUT, NO_OUT = object(), object()


def _out(wanted: bool) -> object:
    return OUT if wanted else NO_OUT


def _call(fn: Callable[..., int], *args: object, device: Optional[int] = None) -> Tuple[Optional[Tensor], ...]:
    """Calls fn(stream, *args) on the thread's stream for `device` (by default the device of the
    first tensor in args) and returns the outputs in order (OUT: a new Tensor, NO_OUT: None)."""
    name = fn.__name__
    params = _abi.FUNCTIONS[name][2][1:]
    if len(args) != len(params):
        raise TypeError(f"{name} takes {len(params)} arguments after the stream, not {len(args)}")
    c_args: list = []
    outs: list = []
    for (pname, _, ctype), a in zip(params, args):
        if a is OUT or a is NO_OUT:
            outs.append(T() if a is OUT else None)
            c_args.append(ctypes.byref(outs[-1]) if a is OUT else None)
        elif ctype == "hpuTensor_t" and a is not None:
            if not isinstance(a, Tensor):
                raise TypeError(f"{name}: {pname} must be an hpu.Tensor, not {type(a).__name__}")
            if device is None:
                device = a.device.index
            c_args.append(a.handle)
        else:
            c_args.append(a)
    try:
        fn(stream_for(device) if device is not None else None, *c_args)
    except ctypes.ArgumentError as e:  # a Python value of no C type the parameter takes
        raise _lib.argument_error(name, e) from None
    return tuple(Tensor(o.value) if o is not None else None for o in outs)


def _operand(x: Union[Tensor, Scalar], like: Tensor) -> Tensor:
    """A scalar operand becomes a 0-dim tensor of the other operand's dtype and device."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return tensor(x, dtype=like.dtype, device=like.device)
    raise TypeError(f"operand must be an hpu.Tensor or a number, not {type(x).__name__}")


# ---- matrix products --------------------------------------------------------------
def mm(a: Tensor, b: Tensor) -> Tensor:
    """a[m,k] @ b[k,n]."""
    return _call(_lib.hpuMm, a, b, OUT)[0]


def mm_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`mm`."""
    return _call(_lib.hpuMmBackward, grad, a, b, OUT, OUT)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """a[B,m,k] @ b[B,k,n]."""
    return _call(_lib.hpuBmm, a, b, OUT)[0]


def bmm_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`bmm`."""
    return _call(_lib.hpuBmmBackward, grad, a, b, OUT, OUT)


def addmm(bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """beta bias + alpha a @ b."""
    return _call(_lib.hpuAddmm, bias, a, b, beta, alpha, OUT)[0]


def addmm_backward(grad: Tensor, bias: Tensor, a: Tensor, b: Tensor, *, beta: float = 1.0,
                   alpha: float = 1.0) -> Tuple[Tensor, Tensor, Tensor]:
    """(grad_bias, grad_a, grad_b) of :func:`addmm`."""
    return _call(_lib.hpuAddmmBackward, grad, bias, a, b, beta, alpha, OUT, OUT, OUT)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul: 1-dim, 2-dim and batched operands."""
    return _call(_lib.hpuMatmul, a, b, OUT)[0]


def matmul_backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    """(grad_a, grad_b) of :func:`matmul`, each summed over the batch dims it was broadcast along."""
    return _call(_lib.hpuMatmulBackward, grad, a, b, OUT, OUT)


def linear(x: Tensor, w: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """x @ w.T + bias (torch.nn.functional.linear)."""
    return _call(_lib.hpuLinear, x, w, bias, OUT)[0]


def linear_backward(grad: Tensor, x: Tensor, w: Tensor,
                    bias: bool = True) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """(grad_x, grad_w, grad_bias) of :func:`linear`; grad_bias is None when `bias` is False."""
    return _call(_lib.hpuLinearBackward, grad, x, w, OUT, OUT, _out(bias))


# ---- elementwise --------------------------------------------------------------------
def _binary_op(op: str, fn: Callable[..., int],
               fn_backward: Callable[..., int]) -> Tuple[Callable[..., Tensor], Callable[..., Tuple[Tensor, Tensor]]]:
    def forward(a: Union[Tensor, Scalar], b: Union[Tensor, Scalar]) -> Tensor:
        if not isinstance(a, Tensor):
            a = _operand(a, b if isinstance(b, Tensor) else tensor(b))
        b = _operand(b, a)
        return _call(fn, a, b, OUT)[0]

    def backward(grad: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        return _call(fn_backward, grad, a, b, OUT, OUT)

    forward.__name__, backward.__name__ = op, op + "_backward"
    forward.__doc__ = f"Elementwise {op} with numpy broadcasting, in the wider of the two dtypes."
    backward.__doc__ = f"(grad_a, grad_b) of :func:`{op}`, summed back to each input's shape."
    return forward, backward


add, add_backward = _binary_op("add", _lib.hpuAdd, _lib.hpuAddBackward)
sub, sub_backward = _binary_op("sub", _lib.hpuSub, _lib.hpuSubBackward)
mul, mul_backward = _binary_op("mul", _lib.hpuMul, _lib.hpuMulBackward)
div, div_backward = _binary_op("div", _lib.hpuDiv, _lib.hpuDivBackward)


def add_(dst: Tensor, src: Tensor, alpha: float = 1.0) -> Tensor:
    """dst += alpha src in place (gradient accumulation); returns dst."""
    _call(_lib.hpuAddInplace, dst, src, alpha)
    return dst


def _unary_op(op: str, fn: Callable[..., int],
              fn_backward: Callable[..., int]) -> Tuple[Callable[[Tensor], Tensor], Callable[[Tensor, Tensor], Tensor]]:
    def forward(x: Tensor) -> Tensor:
        return _call(fn, x, OUT)[0]

    def backward(grad: Tensor, x: Tensor) -> Tensor:
        return _call(fn_backward, grad, x, OUT)[0]

    forward.__name__, backward.__name__ = op, op + "_backward"
    forward.__doc__ = f"Elementwise {op} of a floating tensor."
    backward.__doc__ = f"grad_x of :func:`{op}` (takes the forward's input)."
    return forward, backward


exp, exp_backward = _unary_op("exp", _lib.hpuExp, _lib.hpuExpBackward)
log, log_backward = _unary_op("log", _lib.hpuLog, _lib.hpuLogBackward)
tan, tan_backward = _unary_op("tan", _lib.hpuTan, _lib.hpuTanBackward)
relu, relu_backward = _unary_op("relu", _lib.hpuRelu, _lib.hpuReluBackward)
gelu, gelu_backward = _unary_op("gelu", _lib.hpuGelu, _lib.hpuGeluBackward)
tanh, tanh_backward = _unary_op("tanh", _lib.hpuTanh, _lib.hpuTanhBackward)
sigmoid, sigmoid_backward = _unary_op("sigmoid", _lib.hpuSigmoid, _lib.hpuSigmoidBackward)


# ---- normalisation and losses -----------------------------------------------------------
def _dtype_or(dtype: Optional[DTypeLike], like: Tensor) -> int:
    return (dtypes.resolve(dtype) if dtype is not None else like.dtype).value


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along `dim`."""
    return _call(_lib.hpuSoftmax, x, dim, OUT)[0]


def softmax_backward(grad: Tensor, out: Tensor, dim: int = -1, input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`softmax` from its output; grad_x has `input_dtype` (out's by default)."""
    return _call(_lib.hpuSoftmaxBackward, grad, out, dim, _dtype_or(input_dtype, out), OUT)[0]


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log(softmax(x)) along `dim`, computed stably."""
    return _call(_lib.hpuLogSoftmax, x, dim, OUT)[0]


def log_softmax_backward(grad: Tensor, out: Tensor, dim: int = -1,
                         input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`log_softmax` from its output; grad_x has `input_dtype` (out's by default)."""
    return _call(_lib.hpuLogSoftmaxBackward, grad, out, dim, _dtype_or(input_dtype, out), OUT)[0]


def _reduction(op: str, reduction: str) -> int:
    """A loss's reduction name as hpuReduction_t."""
    if reduction not in _REDUCTIONS:
        raise InvalidArgumentError(f"{op}: reduction {reduction!r} is not 'none', 'mean' or 'sum'")
    return _REDUCTIONS[reduction]


def _loss_options(op: str, function: str, reduction: str, ignore_index: int,
                  label_smoothing: float = 0.0) -> object:
    """The hpuLossOptions_t of loss `op` (calling `function`), by reference."""
    return ctypes.byref(_lib.options(_abi.hpuLossOptions_t, function, reduction=_reduction(op, reduction),
                                     ignore_index=ignore_index, label_smoothing=label_smoothing))


def nll_loss(input: Tensor, target: Tensor, reduction: str = "mean", ignore_index: int = -100, *,
             weight: Optional[Tensor] = None) -> Tensor:
    """Negative log-likelihood of log-probabilities input[N, C] at class indices target[N]
    (also one sample, input [C] and target 0-dim, or spatial, input [N, C, d1, ...] and
    target [N, d1, ...], as torch.nn.functional.nll_loss).

    With `weight` (a floating tensor [C], torch's class weights), sample i's loss is scaled
    by weight[target[i]] and ``"mean"`` divides by the sum of the counted samples' weights.
    Samples whose target is `ignore_index` count nothing. The loss has target's shape for
    ``"none"``, else it is 0-dim."""
    options = _loss_options("nll_loss", "hpuNllLoss", reduction, ignore_index)
    return _call(_lib.hpuNllLoss, input, target, weight, options, OUT)[0]


def nll_loss_backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str = "mean",
                      ignore_index: int = -100, *, weight: Optional[Tensor] = None) -> Tensor:
    """grad_input of :func:`nll_loss`; `grad` has the loss's shape."""
    options = _loss_options("nll_loss_backward", "hpuNllLossBackward", reduction, ignore_index)
    return _call(_lib.hpuNllLossBackward, grad, input, target, weight, options, OUT)[0]


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean", ignore_index: int = -100, *,
                  weight: Optional[Tensor] = None, label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim then nll_loss, fused (torch.nn.functional.cross_entropy;
    Habana's cross_entropy_loss for autocast); shapes and `weight` as in :func:`nll_loss`.
    `label_smoothing` e in [0, 1] mixes in e / C of every class's loss, as torch does.

    A floating `target` of input's shape holds class probabilities (torch's soft targets):
    sample i's loss is sum_j weight[j] * q[i, j] * -log_softmax(input)[i, j] with
    q = (1 - e) * target + e / C; `ignore_index` plays no part and ``"mean"`` divides by
    the number of samples."""
    options = _loss_options("cross_entropy", "hpuCrossEntropyLoss", reduction, ignore_index, label_smoothing)
    return _call(_lib.hpuCrossEntropyLoss, input, target, weight, options, OUT)[0]


def cross_entropy_backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str = "mean",
                           ignore_index: int = -100, *, weight: Optional[Tensor] = None,
                           label_smoothing: float = 0.0) -> Tensor:
    """grad_input of :func:`cross_entropy`."""
    options = _loss_options("cross_entropy_backward", "hpuCrossEntropyLossBackward", reduction,
                            ignore_index, label_smoothing)
    return _call(_lib.hpuCrossEntropyLossBackward, grad, input, target, weight, options, OUT)[0]


def _normalized_ndim(x: Tensor, normalized_shape: Union[None, int, Sequence[int]]) -> int:
    """How many trailing dims of x `normalized_shape` names (torch's: x's shape from there).
    libhpu takes only their number, so that the sizes are x's is checked here."""
    if normalized_shape is None:
        return 1
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not 1 <= len(shape) <= x.ndim or x.shape[x.ndim - len(shape):] != shape:
        raise InvalidArgumentError(f"layer_norm: normalized_shape {shape} is not a non-empty tail of x's shape "
                                   f"{x.shape}")
    return len(shape)


def layer_norm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5,
               return_stats: bool = False, *, normalized_shape: Union[None, int, Sequence[int]] = None
               ) -> Union[Tensor, Tuple[Tensor, Tensor, Tensor]]:
    """Layer normalisation over the last dim, or over the trailing dims `normalized_shape`
    names (torch.nn.functional.layer_norm's; x's shape from some dim on). weight and bias
    have those dims' shape. With `return_stats`, (y, mean, rstd) for the backward: mean and
    rstd are float32 of x's shape without the normalized dims."""
    opts = _lib.options(_abi.hpuLayerNormOptions_t, "hpuLayerNorm",
                        normalized_ndim=_normalized_ndim(x, normalized_shape), eps=eps)
    y, mean_, rstd = _call(_lib.hpuLayerNorm, x, weight, bias, ctypes.byref(opts), OUT, _out(return_stats),
                           _out(return_stats))
    return (y, mean_, rstd) if return_stats else y


def layer_norm_backward(grad: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, weight: Optional[Tensor] = None,
                        bias: bool = True) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """(grad_x, grad_weight, grad_bias) of :func:`layer_norm` (None where there is no weight);
    the normalized dims are those of x that `mean` lacks."""
    affine = weight is not None
    return _call(_lib.hpuLayerNormBackward, grad, x, mean, rstd, weight, OUT, _out(affine), _out(affine and bias))


def dropout(x: Tensor, p: float = 0.5, training: bool = True,
            return_mask: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Zeroes each element with probability p and scales the rest by 1/(1-p) (when training);
    with `return_mask`, (out, mask) where mask is uint8, 1 = kept."""
    out, mask = _call(_lib.hpuDropout, x, p, int(training), OUT, _out(return_mask))
    return (out, mask) if return_mask else out


def dropout_backward(grad: Tensor, mask: Tensor, p: float, input_dtype: Optional[DTypeLike] = None) -> Tensor:
    """grad_x of :func:`dropout`: grad masked and scaled as the forward was; of `input_dtype` (grad's by default)."""
    return _call(_lib.hpuDropoutBackward, grad, mask, p, _dtype_or(input_dtype, grad), OUT)[0]


def embedding(indices: Tensor, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """Rows of weight[V, D] at `indices` (torch.nn.functional.embedding's argument order)."""
    return _call(_lib.hpuEmbedding, weight, indices, -1 if padding_idx is None else padding_idx, OUT)[0]


def embedding_backward(grad: Tensor, indices: Tensor, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """grad_weight of :func:`embedding`: each row of grad added to its index's row (none to padding_idx)."""
    return _call(_lib.hpuEmbeddingBackward, grad, indices, weight, -1 if padding_idx is None else padding_idx,
                 OUT)[0]


# ---- reductions and casts -----------------------------------------------------------
def _dims(dim: Union[None, int, Sequence[int]]) -> Tuple["ctypes.Array", int]:
    """`dim` as a C array and its length (0: all dims)."""
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return (c_int * max(1, len(dims)))(*dims), len(dims)


def sum(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Sum over `dim` (all dims by default); integer sums are int64."""
    dims, ndims = _dims(dim)
    return _call(_lib.hpuSum, x, dims, ndims, int(keepdim), OUT)[0]


def mean(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Mean over `dim` (all dims by default) of a floating tensor."""
    dims, ndims = _dims(dim)
    return _call(_lib.hpuMean, x, dims, ndims, int(keepdim), OUT)[0]


def sum_backward(grad: Tensor, x: Tensor, dim: Union[None, int, Sequence[int]] = None,
                 keepdim: bool = False) -> Tensor:
    """grad_x of :func:`sum`: grad broadcast back to x's shape."""
    dims, ndims = _dims(dim)
    return _call(_lib.hpuSumBackward, grad, x, dims, ndims, int(keepdim), OUT)[0]


def mean_backward(grad: Tensor, x: Tensor, dim: Union[None, int, Sequence[int]] = None,
                  keepdim: bool = False) -> Tensor:
    """grad_x of :func:`mean`: grad broadcast back to x's shape, divided by the count averaged."""
    dims, ndims = _dims(dim)
    return _call(_lib.hpuMeanBackward, grad, x, dims, ndims, int(keepdim), OUT)[0]


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """int64 index of the largest element along `dim` (of the flattened tensor when None),
    the first on ties; a NaN counts as largest (torch.argmax)."""
    if dim is None:
        flat = x.reshape(-1)  # kept alive through the call
        index = _call(_lib.hpuArgmax, flat, 0, 0, OUT)[0]
        return index.reshape(*([1] * x.ndim)) if keepdim else index
    return _call(_lib.hpuArgmax, x, dim, int(keepdim), OUT)[0]


def squared_norm(tensors: Sequence[Tensor]) -> Tensor:
    """The sum of x**2 over every element of `tensors` (floating, on one device), as a float32
    0-dim tensor; its square root is the total norm of gradient clipping. The same bits on
    every run."""
    ts = list(tensors) if not isinstance(tensors, Tensor) else [tensors]
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(f"hpuSquaredNorm: tensors[{i}] must be an hpu.Tensor, not {type(t).__name__}")
    handles = (T * max(1, len(ts)))(*(t.handle for t in ts))
    return _call(_lib.hpuSquaredNorm, handles, len(ts), OUT, device=ts[0].device.index if ts else None)[0]


def scale_(x: Tensor, alpha: float) -> Tensor:
    """x *= alpha in place (a contiguous floating tensor); returns x."""
    _call(_lib.hpuScaleInplace, x, alpha)
    return x


def cast(x: Tensor, dtype: DTypeLike) -> Tensor:
    """A new contiguous tensor of x converted to `dtype` (an op: it runs in stream order)."""
    return _call(_lib.hpuCast, x, dtypes.resolve(dtype).value, OUT)[0]


def cast_backward(grad: Tensor, x: Tensor) -> Tensor:
    """grad_x of :func:`cast`: grad converted to x's dtype."""
    return _call(_lib.hpuCastBackward, grad, x, OUT)[0]


# ---- optimizer steps ------------------------------------------------------------------
def sgd_step(param: Tensor, grad: Tensor, momentum_buffer: Optional[Tensor] = None, *, step: int, lr: float = 0.01,
             momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
             nesterov: bool = False) -> None:
    """One torch.optim.SGD step on `param`, in place."""
    opts = _lib.sized(_abi.hpuSgdOptions_t)
    opts.lr, opts.momentum, opts.dampening, opts.weight_decay, opts.nesterov = \
        lr, momentum, dampening, weight_decay, int(nesterov)
    _call(_lib.hpuSgdStep, param, grad, momentum_buffer, step, ctypes.byref(opts))


def _adamw_options(lr: float, betas: Tuple[float, float], eps: float, weight_decay: float) -> _abi.hpuAdamwOptions_t:
    opts = _lib.sized(_abi.hpuAdamwOptions_t)
    opts.lr, (opts.beta1, opts.beta2), opts.eps, opts.weight_decay = lr, betas, eps, weight_decay
    return opts


def adamw_step(param: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, step: int, lr: float = 1e-3,
               betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
               param_copy: Optional[Tensor] = None) -> None:
    """One torch.optim.AdamW step on `param`, in place. With `param_copy` (bf16 or f16, param's shape), the
    same pass also writes the new `param` converted to its dtype, as :func:`cast` would."""
    opts = _adamw_options(lr, betas, eps, weight_decay)
    if param_copy is not None:
        if not isinstance(param_copy, Tensor):
            raise TypeError(f"hpuAdamwStep: param_copy must be an hpu.Tensor, not {type(param_copy).__name__}")
        opts.param_copy = param_copy.handle
    _call(_lib.hpuAdamwStep, param, grad, exp_avg, exp_avg_sq, step, ctypes.byref(opts))



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
