'use strict';
// The ops (Habana/ATen names in camelCase), each with its backward, and the fused
// optimizer steps. Every op runs under the caller's autocast region (autocast()),
// queues the work on the device's stream (withStream, else the default) and
// returns new tensors. libhpu checks every argument (devices, shapes, dtypes,
// ranges) and names the one it rejects: its status and message become the
// HpuError, so errors read the same as in C and in every binding. The wrappers
// here only turn JavaScript values into C ones.

const { abi, C, sized } = require('./native');
const { invalidArgument } = require('./errors');
const { dtypeInfo } = require('./dtypes');
const { streamFor } = require('./stream');
const { underAutocast } = require('./autocast');
const { Tensor, tensor } = require('./tensor');

const UNARY = ['exp', 'log', 'tan', 'relu', 'gelu', 'tanh', 'sigmoid'];
const BINARY = ['add', 'sub', 'mul', 'div'];
const cap = (s) => s[0].toUpperCase() + s.slice(1);
const { HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM } = abi.ENUMS.hpuReduction_t;
const REDUCTIONS = { none: HPU_REDUCTION_NONE, mean: HPU_REDUCTION_MEAN, sum: HPU_REDUCTION_SUM };

// ---- calling -----------------------------------------------------------------------
// call(name, ...args) takes one argument per C parameter after the stream:
// tensors as they are (null: NULL), OUT for an output the op returns and NO_OUT
// for one not wanted (NULL).
const OUT = Symbol('OUT');
const NO_OUT = Symbol('NO_OUT');
const out = (wanted) => (wanted ? OUT : NO_OUT);

/**
 * Calls name(stream, ...args) under autocast on the stream for `device` (undefined: the device
 * of the first tensor in args); returns the output, or the array of outputs when there are
 * several (OUT: a new Tensor, NO_OUT: null).
 */
function callOn(device, name, args) {
  if (!(name in C)) throw new TypeError(`${name} is not a libhpu function`);
  const params = abi.FUNCTIONS[name][2].slice(1);
  if (args.length !== params.length) throw new TypeError(`${name} takes ${params.length} arguments after the stream, not ${args.length}`);
  const outs = [];
  const cArgs = args.map((a, i) => {
    const [param, ctype] = params[i];
    if (a === OUT || a === NO_OUT) {
      outs.push(a === OUT ? [null] : null);
      return outs[outs.length - 1];
    }
    if (NUMBERS.has(ctype) || ctype in abi.ENUMS) return number(name, param, ctype, a);
    if (ctype !== 'hpuTensor_t' || a === null || a === undefined) return a ?? null;
    if (!(a instanceof Tensor)) throw new TypeError(`${name}: ${param} must be an hpu.Tensor`);
    if (device === undefined) device = a.device.index;
    return a.handle;
  });
  underAutocast(() => C[name](device === undefined ? null : streamFor(device), ...cArgs));
  const result = outs.map((o) => (o ? new Tensor(o[0]) : null));
  return result.length === 1 ? result[0] : result;
}

const call = (name, ...args) => callOn(undefined, name, args);

// C number types of the ops' parameters (enums are int too). koffi would truncate 1.5 for
// an integer silently, so the conversion is checked here.
const NUMBERS = new Set(['int', 'int64_t', 'size_t', 'double', 'float']);

function number(name, param, ctype, a) {
  const ok = ctype === 'double' || ctype === 'float' ? typeof a === 'number' : Number.isInteger(a) || typeof a === 'bigint';
  if (!ok) throw new TypeError(`${name}: ${param} must be ${ctype === 'double' || ctype === 'float' ? 'a number' : 'an integer'}, not ${JSON.stringify(a)}`);
  return a;
}

function operand(x, like) {
  if (x instanceof Tensor) return x;
  if (typeof x === 'number') return tensor(x, { dtype: like.dtype, device: like.device });
  throw new TypeError('operand must be an hpu.Tensor or a number');
}

/** A loss's reduction name as hpuReduction_t. */
function reductionOf(op, reduction) {
  if (!(reduction in REDUCTIONS)) throw invalidArgument(`${op}: reduction '${reduction}' is not 'none', 'mean' or 'sum'`);
  return REDUCTIONS[reduction];
}

/** How many trailing dims of x normalizedShape (a number or an array; null: the last dim) names; libhpu
 * takes only their number, so that the sizes are x's is checked here. */
function normalizedNdim(x, normalizedShape) {
  if (normalizedShape === null || normalizedShape === undefined) return 1;
  const shape = [].concat(normalizedShape);
  if (shape.length < 1 || shape.length > x.ndim || shape.join() !== x.shape.slice(x.ndim - shape.length).join()) {
    throw invalidArgument(`layerNorm: normalizedShape [${shape}] is not a non-empty tail of x's shape [${x.shape}]`);
  }
  return shape.length;
}

function adamwOptions({ lr = 1e-3, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 1e-2, paramCopy = null }) {
  if (paramCopy !== null && !(paramCopy instanceof Tensor)) throw new TypeError('hpuAdamwStep: paramCopy must be an hpu.Tensor');
  return { ...sized('hpuAdamwOptions_t'), lr, beta1: betas[0], beta2: betas[1], eps, weight_decay: weightDecay,
    param_copy: paramCopy ? paramCopy.handle : null };
}

const ops = {
  mm: (a, b) => call('hpuMm', a, b, OUT),
  mmBackward: (g, a, b) => call('hpuMmBackward', g, a, b, OUT, OUT),
  bmm: (a, b) => call('hpuBmm', a, b, OUT),
  bmmBackward: (g, a, b) => call('hpuBmmBackward', g, a, b, OUT, OUT),
  matmul: (a, b) => call('hpuMatmul', a, b, OUT),
  matmulBackward: (g, a, b) => call('hpuMatmulBackward', g, a, b, OUT, OUT),
  /** beta bias + alpha a @ b. */
  addmm: (bias, a, b, { beta = 1, alpha = 1 } = {}) => call('hpuAddmm', bias, a, b, beta, alpha, OUT),
  addmmBackward: (g, bias, a, b, { beta = 1, alpha = 1 } = {}) => call('hpuAddmmBackward', g, bias, a, b, beta, alpha, OUT, OUT, OUT),
  /** x @ w^T + bias. */
  linear: (x, w, bias = null) => call('hpuLinear', x, w, bias, OUT),
  /** [gradX, gradW, gradBias] (gradBias null when bias is false). */
  linearBackward: (g, x, w, bias = true) => call('hpuLinearBackward', g, x, w, OUT, OUT, out(bias)),
  /** dst += alpha src, in place; returns dst. */
  addInplace(dst, src, alpha = 1) {
    call('hpuAddInplace', dst, src, alpha);
    return dst;
  },
  softmax: (x, dim = -1) => call('hpuSoftmax', x, dim, OUT),
  softmaxBackward: (g, o, dim = -1, inputDtype = o.dtype) => call('hpuSoftmaxBackward', g, o, dim, dtypeInfo(inputDtype).value, OUT),
  logSoftmax: (x, dim = -1) => call('hpuLogSoftmax', x, dim, OUT),
  logSoftmaxBackward: (g, o, dim = -1, inputDtype = o.dtype) => call('hpuLogSoftmaxBackward', g, o, dim, dtypeInfo(inputDtype).value, OUT),
  /**
   * Layer norm over the last dim, or over the trailing dims normalizedShape names
   * (x's shape from some dim on); weight and bias have those dims' shape. y, or
   * [y, mean, rstd] with returnStats (float32, x's shape without the normalized dims).
   */
  layerNorm(x, { weight = null, bias = null, eps = 1e-5, returnStats = false, normalizedShape = null } = {}) {
    const options = { ...sized('hpuLayerNormOptions_t'), normalized_ndim: normalizedNdim(x, normalizedShape),
      eps: number('hpuLayerNorm', 'options->eps', 'double', eps) };
    const r = call('hpuLayerNorm', x, weight, bias, options, OUT, out(returnStats), out(returnStats));
    return returnStats ? r : r[0];
  },
  /** [gradX, gradWeight, gradBias] (null without weight); the normalized dims are those of x that mean lacks. */
  layerNormBackward: (g, x, mean, rstd, weight = null) => call('hpuLayerNormBackward', g, x, mean, rstd, weight, OUT, out(weight), out(weight)),
  /** out, or [out, mask] with returnMask. */
  dropout(x, { p = 0.5, training = true, returnMask = false } = {}) {
    const r = call('hpuDropout', x, p, training ? 1 : 0, OUT, out(returnMask));
    return returnMask ? r : r[0];
  },
  dropoutBackward: (g, mask, p, inputDtype = g.dtype) => call('hpuDropoutBackward', g, mask, p, dtypeInfo(inputDtype).value, OUT),
  /** Rows of weight [V, D] at indices. */
  embedding: (idx, weight, paddingIdx = -1) => call('hpuEmbedding', weight, idx, paddingIdx, OUT),
  embeddingBackward: (g, idx, weight, paddingIdx = -1) => call('hpuEmbeddingBackward', g, idx, weight, paddingIdx, OUT),
  /** int64 index of the largest element along dim (of the flattened tensor when dim is null), the first on ties. */
  argmax(x, { dim = null, keepdim = false } = {}) {
    if (dim === null || dim === undefined) {
      const index = call('hpuArgmax', x.reshape([-1]), 0, 0, OUT);
      return keepdim ? index.reshape(x.shape.map(() => 1)) : index;
    }
    return call('hpuArgmax', x, dim, keepdim ? 1 : 0, OUT);
  },
  /** Sum of x**2 over every element of the tensors (floating, one device): a float32 0-dim tensor, the same bits every run. */
  squaredNorm(tensors) {
    const ts = tensors instanceof Tensor ? [tensors] : Array.from(tensors);
    ts.forEach((t, i) => { if (!(t instanceof Tensor)) throw new TypeError(`hpuSquaredNorm: tensors[${i}] must be an hpu.Tensor`); });
    return callOn(ts.length ? ts[0].device.index : undefined, 'hpuSquaredNorm', [ts.map((t) => t.handle), ts.length, OUT]);
  },
  /** x *= alpha in place (a contiguous floating tensor); returns x. */
  scaleInplace(x, alpha) {
    call('hpuScaleInplace', x, alpha);
    return x;
  },
  cast: (x, dtype) => call('hpuCast', x, dtypeInfo(dtype).value, OUT),
  castBackward: (g, x) => call('hpuCastBackward', g, x, OUT),
  /** One torch.optim.SGD step on param, in place. */
  sgdStep(param, grad, momentumBuffer, { step, lr = 0.01, momentum = 0, dampening = 0, weightDecay = 0, nesterov = false }) {
    const options = { ...sized('hpuSgdOptions_t'), lr, momentum, dampening, weight_decay: weightDecay,
      nesterov: nesterov ? 1 : 0 };
    call('hpuSgdStep', param, grad, momentumBuffer, step, options);
  },
  /**
   * One torch.optim.AdamW step on param, in place. With paramCopy (bfloat16 or float16, param's shape), the same
   * pass also writes the new param converted to its dtype, as cast would.
   */
  adamwStep(param, grad, expAvg, expAvgSq, options) {
    call('hpuAdamwStep', param, grad, expAvg, expAvgSq, options.step, adamwOptions(options));
  },
};

// nllLoss, crossEntropy and their backwards. options.weight (a floating tensor
// [C]) scales each sample's loss by its class's weight, and 'mean' divides by
// the sum of the counted samples' weights; crossEntropy's labelSmoothing e mixes
// in e / C of every class's loss, as torch does. crossEntropy also takes class
// probabilities (torch's soft targets): a floating target of input's shape,
// sample i's loss sum_j weight[j] q[i, j] -logSoftmax(input)[i, j] with
// q = (1 - e) target + e / C, ignoreIndex unused and 'mean' over the samples.
/** The hpuLossOptions_t of loss `op`'s options, for C function `name`. */
function lossOptions(op, name, { reduction = 'mean', ignoreIndex = -100, labelSmoothing = 0 }) {
  if (op.startsWith('nllLoss') && labelSmoothing) throw invalidArgument(`${op}: labelSmoothing is for crossEntropy only`);
  return {
    ...sized('hpuLossOptions_t'), reduction: reductionOf(op, reduction),
    ignore_index: number(name, 'options->ignore_index', 'int64_t', ignoreIndex),
    label_smoothing: number(name, 'options->label_smoothing', 'double', labelSmoothing),
  };
}

Object.assign(ops, {
  nllLoss: (input, target, options = {}) => call('hpuNllLoss', input, target, options.weight ?? null,
    lossOptions('nllLoss', 'hpuNllLoss', options), OUT),
  nllLossBackward: (g, input, target, options = {}) => call('hpuNllLossBackward', g, input, target,
    options.weight ?? null, lossOptions('nllLossBackward', 'hpuNllLossBackward', options), OUT),
  crossEntropy: (input, target, options = {}) => call('hpuCrossEntropyLoss', input, target, options.weight ?? null,
    lossOptions('crossEntropy', 'hpuCrossEntropyLoss', options), OUT),
  crossEntropyBackward: (g, input, target, options = {}) => call('hpuCrossEntropyLossBackward', g, input, target,
    options.weight ?? null, lossOptions('crossEntropyBackward', 'hpuCrossEntropyLossBackward', options), OUT),
});

for (const op of BINARY) {
  const name = `hpu${cap(op)}`;
  ops[op] = (a, b) => {
    const ta = a instanceof Tensor ? a : operand(a, b);
    return call(name, ta, operand(b, ta), OUT);
  };
  ops[`${op}Backward`] = (g, a, b) => callOn(undefined, `${name}Backward`, [g, a, b, OUT, OUT]);
}
for (const op of UNARY) {
  const name = `hpu${cap(op)}`;
  ops[op] = (x) => callOn(undefined, name, [x, OUT]);
  ops[`${op}Backward`] = (g, x) => callOn(undefined, `${name}Backward`, [g, x, OUT]);
}
for (const op of ['sum', 'mean']) {
  const name = `hpu${cap(op)}`;
  const dimsOf = (dim) => {
    const dims = dim === undefined || dim === null ? [] : [].concat(dim);
    return [Int32Array.from(dims.length ? dims : [0]), dims.length];
  };
  ops[op] = (x, { dim, keepdim = false } = {}) => {
    const [dims, n] = dimsOf(dim);
    return callOn(undefined, name, [x, dims, n, keepdim ? 1 : 0, OUT]);
  };
  ops[`${op}Backward`] = (g, x, { dim, keepdim = false } = {}) => {
    const [dims, n] = dimsOf(dim);
    return callOn(undefined, `${name}Backward`, [g, x, dims, n, keepdim ? 1 : 0, OUT]);
  };
}

// Tensor methods for the common ops.
for (const name of ['mm', 'bmm', 'matmul', 'add', 'sub', 'mul', 'div', ...UNARY, 'softmax', 'logSoftmax', 'sum', 'mean', 'argmax']) {
  Tensor.prototype[name] = function method(...args) { return ops[name](this, ...args); };
}

module.exports = ops;
