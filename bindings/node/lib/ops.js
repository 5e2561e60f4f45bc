'use strict';
// The ops (Habana/ATen names in camelCase), each with its backward, and the fused
// optimizer steps. Every op checks devices, shapes and dtypes before calling
// libhpu, runs under the caller's autocast region (autocast()), queues the work
// on the device's stream (withStream, else the default) and returns new tensors.

const { koffi, declare, sized } = require('./native');
const { invalidArgument } = require('./errors');
const { DTYPES, dtypeInfo } = require('./dtypes');
const { streamFor } = require('./stream');
const { underAutocast } = require('./autocast');
const { Tensor, tensor } = require('./tensor');

const SgdOptions = koffi.struct('hpuSgdOptions_t', {
  struct_size: 'size_t', lr: 'double', momentum: 'double', dampening: 'double', weight_decay: 'double', nesterov: 'int',
});
const AdamwOptions = koffi.struct('hpuAdamwOptions_t', {
  struct_size: 'size_t', lr: 'double', beta1: 'double', beta2: 'double', eps: 'double', weight_decay: 'double',
  param_copy: 'hpuHandle',
});

const T = 'hpuHandle';
const O = '_Out_ hpuHandle *';
const UNARY = ['exp', 'log', 'tan', 'relu', 'gelu', 'tanh', 'sigmoid'];
const BINARY = ['add', 'sub', 'mul', 'div'];
const cap = (s) => s[0].toUpperCase() + s.slice(1);
const prototypes = {
  Mm: `${T} a, ${T} b, ${O}out`, MmBackward: `${T} g, ${T} a, ${T} b, ${O}ga, ${O}gb`,
  Bmm: `${T} a, ${T} b, ${O}out`, BmmBackward: `${T} g, ${T} a, ${T} b, ${O}ga, ${O}gb`,
  Matmul: `${T} a, ${T} b, ${O}out`, MatmulBackward: `${T} g, ${T} a, ${T} b, ${O}ga, ${O}gb`,
  Addmm: `${T} bias, ${T} a, ${T} b, double beta, double alpha, ${O}out`,
  AddmmBackward: `${T} g, ${T} bias, ${T} a, ${T} b, double beta, double alpha, ${O}gbias, ${O}ga, ${O}gb`,
  Linear: `${T} x, ${T} w, ${T} bias, ${O}y`, LinearBackward: `${T} g, ${T} x, ${T} w, ${O}gx, ${O}gw, ${O}gb`,
  AddInplace: `${T} src, double alpha, ${T} dst`,
  Softmax: `${T} x, int dim, ${O}out`, SoftmaxBackward: `${T} g, ${T} out, int dim, int dtype, ${O}gx`,
  LogSoftmax: `${T} x, int dim, ${O}out`, LogSoftmaxBackward: `${T} g, ${T} out, int dim, int dtype, ${O}gx`,
  NllLoss: `${T} input, ${T} target, int reduction, int64_t ignore, ${O}loss`,
  NllLossBackward: `${T} g, ${T} input, ${T} target, int reduction, int64_t ignore, ${O}gi`,
  CrossEntropyLoss: `${T} input, ${T} target, int reduction, int64_t ignore, ${O}loss`,
  CrossEntropyLossBackward: `${T} g, ${T} input, ${T} target, int reduction, int64_t ignore, ${O}gi`,
  NllLossWeighted: `${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, ${O}loss`,
  NllLossWeightedBackward: `${T} g, ${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, ${O}gi`,
  CrossEntropyLossWeighted: `${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, ${O}loss`,
  CrossEntropyLossWeightedBackward: `${T} g, ${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, ${O}gi`,
  CrossEntropyLossSmoothed: `${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, double e, ${O}loss`,
  CrossEntropyLossSmoothedBackward: `${T} g, ${T} input, ${T} target, ${T} weight, int reduction, int64_t ignore, double e, ${O}gi`,
  LayerNormNd: `${T} x, int ndim, ${T} w, ${T} b, double eps, ${O}y, ${O}mean, ${O}rstd`,
  LayerNormBackward: `${T} g, ${T} x, ${T} mean, ${T} rstd, ${T} w, ${O}gx, ${O}gw, ${O}gb`,
  Dropout: `${T} x, double p, int train, ${O}out, ${O}mask`,
  DropoutBackward: `${T} g, ${T} mask, double p, int dtype, ${O}gx`,
  Embedding: `${T} w, ${T} idx, int64_t pad, ${O}out`, EmbeddingBackward: `${T} g, ${T} idx, ${T} w, int64_t pad, ${O}gw`,
  Sum: `${T} x, const int *dims, int n, int keep, ${O}out`, SumBackward: `${T} g, ${T} x, const int *dims, int n, int keep, ${O}gx`,
  Mean: `${T} x, const int *dims, int n, int keep, ${O}out`, MeanBackward: `${T} g, ${T} x, const int *dims, int n, int keep, ${O}gx`,
  Cast: `${T} x, int dtype, ${O}out`, CastBackward: `${T} g, ${T} x, ${O}gx`,
  Argmax: `${T} x, int dim, int keepdim, ${O}out`, SquaredNorm: `const ${T} *tensors, size_t count, ${O}out`,
  ScaleInplace: `${T} x, double alpha`,
  SgdStep: `${T} p, ${T} g, ${T} buf, int64_t step, const hpuSgdOptions_t *o`,
  AdamwStep: `${T} p, ${T} g, ${T} m, ${T} v, int64_t step, const hpuAdamwOptions_t *o`,
};
for (const op of BINARY) {
  prototypes[cap(op)] = `${T} a, ${T} b, ${O}out`;
  prototypes[`${cap(op)}Backward`] = `${T} g, ${T} a, ${T} b, ${O}ga, ${O}gb`;
}
for (const op of UNARY) {
  prototypes[cap(op)] = `${T} x, ${O}out`;
  prototypes[`${cap(op)}Backward`] = `${T} g, ${T} x, ${O}gx`;
}
const C = declare(Object.fromEntries(Object.entries(prototypes).map(
  ([name, args]) => [name, `int hpu${name}(${T} stream, ${args})`])));

const REDUCTIONS = { none: 0, mean: 1, sum: 2 };

// ---- checks made before the call -------------------------------------------------
/** Checks that the named arguments are tensors on one device; returns its index. */
function onOneDevice(op, named) {
  let first;
  for (const [name, t] of Object.entries(named)) {
    if (t === null || t === undefined) continue;
    if (!(t instanceof Tensor)) throw new TypeError(`${op}: ${name} must be an hpu.Tensor`);
    if (!first) first = [name, t];
    else if (!t.device.equals(first[1].device)) {
      throw invalidArgument(`${op}: ${name} is on ${t.device} but ${first[0]} on ${first[1].device}; an op's tensors share a device`);
    }
  }
  if (!first) throw invalidArgument(`${op}: no tensor argument`);
  return first[1].device.index;
}

function floating(op, named) {
  for (const [name, t] of Object.entries(named)) {
    if (t && !DTYPES[t.dtype].floating) throw invalidArgument(`${op}: ${name} has dtype ${t.dtype}; a floating type is needed`);
  }
}

function ndim(op, name, t, ...allowed) {
  if (!allowed.includes(t.ndim)) {
    throw invalidArgument(`${op}: ${name} has shape [${t.shape}] (${t.ndim} dims); ${allowed.join(' or ')} dims are needed`);
  }
}

function same(op, what, [an, a], [bn, b]) {
  if (a !== b) throw invalidArgument(`${op}: ${what}: ${an} is ${a} but ${bn} is ${b}`);
}

function shapeIs(op, name, t, shape) {
  if (t.shape.join() !== shape.join()) throw invalidArgument(`${op}: ${name} has shape [${t.shape}]; [${shape}] is needed`);
}

function indices(op, name, t) {
  if (t.dtype !== 'int32' && t.dtype !== 'int64') throw invalidArgument(`${op}: ${name} has dtype ${t.dtype}; int32 or int64 is needed`);
}

function broadcastable(op, a, b) {
  const n = Math.min(a.ndim, b.ndim);
  for (let i = 1; i <= n; i++) {
    const x = a.shape[a.ndim - i];
    const y = b.shape[b.ndim - i];
    if (x !== y && x !== 1 && y !== 1) throw invalidArgument(`${op}: shapes [${a.shape}] and [${b.shape}] do not broadcast`);
  }
}

function dimOf(op, x, dim) {
  const n = Math.max(x.ndim, 1);
  if (!Number.isInteger(dim) || dim < -n || dim >= n) throw invalidArgument(`${op}: dim ${dim} is out of range for shape [${x.shape}]`);
  return dim;
}

// ---- calling -----------------------------------------------------------------------
/** Calls hpu<name>(stream, ...args, &out...) under autocast; wraps each wanted output (false: NULL). */
function call(name, device, args, wanted = [true]) {
  const outs = wanted.map((w) => (w ? [null] : null));
  underAutocast(() => C[name](streamFor(device), ...args, ...outs));
  const result = outs.map((o) => (o ? new Tensor(o[0]) : null));
  return wanted.length === 1 ? result[0] : result;
}

const h = (t) => (t ? t.handle : null);

function checkMm(op, a, b) {
  const dev = onOneDevice(op, { a, b });
  floating(op, { a, b });
  ndim(op, 'a', a, 2);
  ndim(op, 'b', b, 2);
  same(op, 'inner dims differ', ['a.shape[1]', a.shape[1]], ['b.shape[0]', b.shape[0]]);
  return dev;
}

function checkBmm(op, a, b) {
  const dev = onOneDevice(op, { a, b });
  floating(op, { a, b });
  ndim(op, 'a', a, 3);
  ndim(op, 'b', b, 3);
  same(op, 'batch sizes differ', ['a.shape[0]', a.shape[0]], ['b.shape[0]', b.shape[0]]);
  same(op, 'inner dims differ', ['a.shape[2]', a.shape[2]], ['b.shape[1]', b.shape[1]]);
  return dev;
}

function checkMatmul(op, a, b) {
  const dev = onOneDevice(op, { a, b });
  floating(op, { a, b });
  if (a.ndim === 0 || b.ndim === 0) throw invalidArgument(`${op}: a [${a.shape}] and b [${b.shape}] need at least 1 dim each`);
  same(op, 'inner dims differ', ['a.shape[-1]', a.shape[a.ndim - 1]], ['the contracted dim of b', b.ndim === 1 ? b.shape[0] : b.shape[b.ndim - 2]]);
  return dev;
}

function checkLinear(op, x, w, bias) {
  const dev = onOneDevice(op, { x, w, bias });
  floating(op, { x, w, bias });
  ndim(op, 'w', w, 2);
  if (x.ndim === 0) throw invalidArgument(`${op}: x needs at least 1 dim`);
  same(op, 'in_features differ', ['x.shape[-1]', x.shape[x.ndim - 1]], ['w.shape[1]', w.shape[1]]);
  if (bias) shapeIs(op, 'bias', bias, [w.shape[0]]);
  return dev;
}

const ops = {
  mm: (a, b) => call('Mm', checkMm('mm', a, b), [a.handle, b.handle]),
  mmBackward: (g, a, b) => call('MmBackward', checkMm('mmBackward', a, b), [g.handle, a.handle, b.handle], [true, true]),
  bmm: (a, b) => call('Bmm', checkBmm('bmm', a, b), [a.handle, b.handle]),
  bmmBackward: (g, a, b) => call('BmmBackward', checkBmm('bmmBackward', a, b), [g.handle, a.handle, b.handle], [true, true]),
  matmul: (a, b) => call('Matmul', checkMatmul('matmul', a, b), [a.handle, b.handle]),
  matmulBackward: (g, a, b) => call('MatmulBackward', checkMatmul('matmulBackward', a, b), [g.handle, a.handle, b.handle], [true, true]),
  /** beta bias + alpha a @ b. */
  addmm(bias, a, b, { beta = 1, alpha = 1 } = {}) {
    const dev = checkMm('addmm', a, b);
    onOneDevice('addmm', { bias, a });
    return call('Addmm', dev, [bias.handle, a.handle, b.handle, beta, alpha]);
  },
  addmmBackward(g, bias, a, b, { beta = 1, alpha = 1 } = {}) {
    return call('AddmmBackward', checkMm('addmmBackward', a, b), [g.handle, bias.handle, a.handle, b.handle, beta, alpha], [true, true, true]);
  },
  /** x @ w^T + bias. */
  linear: (x, w, bias = null) => call('Linear', checkLinear('linear', x, w, bias), [x.handle, w.handle, h(bias)]),
  /** [gradX, gradW, gradBias] (gradBias null when bias is false). */
  linearBackward: (g, x, w, bias = true) => call('LinearBackward', checkLinear('linearBackward', x, w, null), [g.handle, x.handle, w.handle], [true, true, bias]),
  /** dst += alpha src, in place; returns dst. */
  addInplace(dst, src, alpha = 1) {
    const dev = onOneDevice('addInplace', { dst, src });
    floating('addInplace', { dst, src });
    shapeIs('addInplace', 'src', src, dst.shape);
    underAutocast(() => C.AddInplace(streamFor(dev), src.handle, alpha, dst.handle));
    return dst;
  },
  softmax(x, dim = -1) {
    const dev = onOneDevice('softmax', { x });
    floating('softmax', { x });
    return call('Softmax', dev, [x.handle, dimOf('softmax', x, dim)]);
  },
  softmaxBackward: (g, out, dim = -1, inputDtype = out.dtype) => call('SoftmaxBackward', onOneDevice('softmaxBackward', { g, out }), [g.handle, out.handle, dimOf('softmaxBackward', out, dim), dtypeInfo(inputDtype).value]),
  logSoftmax(x, dim = -1) {
    const dev = onOneDevice('logSoftmax', { x });
    floating('logSoftmax', { x });
    return call('LogSoftmax', dev, [x.handle, dimOf('logSoftmax', x, dim)]);
  },
  logSoftmaxBackward: (g, out, dim = -1, inputDtype = out.dtype) => call('LogSoftmaxBackward', onOneDevice('logSoftmaxBackward', { g, out }), [g.handle, out.handle, dimOf('logSoftmaxBackward', out, dim), dtypeInfo(inputDtype).value]),
  /**
   * Layer norm over the last dim, or over the trailing dims normalizedShape names
   * (x's shape from some dim on); weight and bias have those dims' shape. y, or
   * [y, mean, rstd] with returnStats (float32, x's shape without the normalized dims).
   */
  layerNorm(x, { weight = null, bias = null, eps = 1e-5, returnStats = false, normalizedShape = null } = {}) {
    const dev = onOneDevice('layerNorm', { x, weight, bias });
    floating('layerNorm', { x, weight, bias });
    const k = normalizedNdim('layerNorm', x, normalizedShape);
    normParams('layerNorm', x, k, { weight, bias });
    if (typeof eps !== 'number' || !(eps >= 0 && eps < Infinity)) throw invalidArgument(`layerNorm: eps ${eps} is not a finite number >= 0`);
    const r = call('LayerNormNd', dev, [x.handle, k, h(weight), h(bias), eps], [true, returnStats, returnStats]);
    return returnStats ? r : r[0];
  },
  /** [gradX, gradWeight, gradBias] (null without weight); the normalized dims are those of x that mean lacks. */
  layerNormBackward(g, x, mean, rstd, weight = null) {
    const dev = onOneDevice('layerNormBackward', { g, x, mean, rstd, weight });
    floating('layerNormBackward', { g, x, weight });
    shapeIs('layerNormBackward', 'the gradient', g, x.shape);
    const k = x.ndim - mean.ndim;
    if (x.ndim === 0 || k < 1 || mean.shape.join() !== x.shape.slice(0, mean.ndim).join()) {
      throw invalidArgument(`layerNormBackward: mean has shape [${mean.shape}]; x's shape [${x.shape}] without its `
        + "normalized dims is needed (layerNorm's returnStats)");
    }
    normParams('layerNormBackward', x, k, { weight });
    return call('LayerNormBackward', dev, [g.handle, x.handle, mean.handle, rstd.handle, h(weight)], [true, !!weight, !!weight]);
  },
  /** out, or [out, mask] with returnMask. */
  dropout(x, { p = 0.5, training = true, returnMask = false } = {}) {
    const dev = onOneDevice('dropout', { x });
    floating('dropout', { x });
    if (!(p >= 0 && p < 1)) throw invalidArgument(`dropout: p ${p} is not in [0, 1)`);
    const r = call('Dropout', dev, [x.handle, p, training ? 1 : 0], [true, returnMask]);
    return returnMask ? r : r[0];
  },
  dropoutBackward: (g, mask, p, inputDtype = g.dtype) => call('DropoutBackward', onOneDevice('dropoutBackward', { g, mask }), [g.handle, mask.handle, p, dtypeInfo(inputDtype).value]),
  /** Rows of weight [V, D] at indices. */
  embedding(idx, weight, paddingIdx = -1) {
    const dev = onOneDevice('embedding', { idx, weight });
    indices('embedding', 'indices', idx);
    ndim('embedding', 'weight', weight, 2);
    return call('Embedding', dev, [weight.handle, idx.handle, paddingIdx]);
  },
  embeddingBackward: (g, idx, weight, paddingIdx = -1) => call('EmbeddingBackward', onOneDevice('embeddingBackward', { g, idx, weight }), [g.handle, idx.handle, weight.handle, paddingIdx]),
  /** int64 index of the largest element along dim (of the flattened tensor when dim is null), the first on ties. */
  argmax(x, { dim = null, keepdim = false } = {}) {
    const dev = onOneDevice('argmax', { x });
    if (x.dtype === 'bool') throw invalidArgument('argmax: x has dtype bool; a number type is needed');
    if (dim === null || dim === undefined) {
      if (x.numel === 0) throw invalidArgument(`argmax: x of shape [${x.shape}] has no elements`);
      const index = call('Argmax', dev, [x.reshape([-1]).handle, 0, 0]);
      return keepdim ? index.reshape(x.shape.map(() => 1)) : index;
    }
    const d = dimOf('argmax', x, dim);
    if (x.ndim > 0 && x.shape[(d + x.ndim) % x.ndim] === 0) throw invalidArgument(`argmax: dim ${dim} of shape [${x.shape}] is empty`);
    return call('Argmax', dev, [x.handle, d, keepdim ? 1 : 0]);
  },
  /** Sum of x**2 over every element of the tensors (floating, one device): a float32 0-dim tensor, the same bits every run. */
  squaredNorm(tensors) {
    const ts = tensors instanceof Tensor ? [tensors] : Array.from(tensors);
    if (ts.length === 0) throw invalidArgument('squaredNorm: tensors is empty; at least one tensor is needed');
    const named = Object.fromEntries(ts.map((t, i) => [`tensors[${i}]`, t]));
    const dev = onOneDevice('squaredNorm', named);
    floating('squaredNorm', named);
    return call('SquaredNorm', dev, [ts.map((t) => t.handle), ts.length]);
  },
  /** x *= alpha in place (a contiguous floating tensor); returns x. */
  scaleInplace(x, alpha) {
    const dev = onOneDevice('scaleInplace', { x });
    floating('scaleInplace', { x });
    if (!x.isContiguous()) throw invalidArgument(`scaleInplace: x (shape [${x.shape}], strides [${x.strides}]) is not contiguous`);
    if (typeof alpha !== 'number') throw new TypeError('scaleInplace: alpha must be a number');
    underAutocast(() => C.ScaleInplace(streamFor(dev), x.handle, alpha));
    return x;
  },
  cast: (x, dtype) => call('Cast', onOneDevice('cast', { x }), [x.handle, dtypeInfo(dtype).value]),
  castBackward: (g, x) => call('CastBackward', onOneDevice('castBackward', { g, x }), [g.handle, x.handle]),
  /** One torch.optim.SGD step on param, in place. */
  sgdStep(param, grad, momentumBuffer, { step, lr = 0.01, momentum = 0, dampening = 0, weightDecay = 0, nesterov = false }) {
    const dev = checkStep('sgdStep', param, grad, step, { momentumBuffer });
    const o = { ...sized(SgdOptions), lr, momentum, dampening, weight_decay: weightDecay, nesterov: nesterov ? 1 : 0 };
    C.SgdStep(streamFor(dev), param.handle, grad.handle, h(momentumBuffer), step, o);
  },
  /**
   * One torch.optim.AdamW step on param, in place. With paramCopy (bfloat16 or float16, param's shape), the same
   * pass also writes the new param converted to its dtype, as cast would.
   */
  adamwStep(param, grad, expAvg, expAvgSq, { step, lr = 1e-3, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 1e-2,
    paramCopy = null }) {
    const dev = checkStep('adamwStep', param, grad, step, { expAvg, expAvgSq, paramCopy });
    const o = { ...sized(AdamwOptions), lr, beta1: betas[0], beta2: betas[1], eps, weight_decay: weightDecay,
      param_copy: h(paramCopy) };
    C.AdamwStep(streamFor(dev), param.handle, grad.handle, expAvg.handle, expAvgSq.handle, step, o);
  },
};

function checkStep(op, param, grad, step, state) {
  const dev = onOneDevice(op, { param, grad, ...state });
  if (param.dtype !== 'float32') throw invalidArgument(`${op}: param has dtype ${param.dtype}; float32 master weights are needed`);
  floating(op, { grad });
  for (const [name, t] of Object.entries({ grad, ...state })) if (t) shapeIs(op, name, t, param.shape);
  if (!Number.isInteger(step) || step < 1) throw invalidArgument(`${op}: step ${step} is not an integer >= 1`);
  return dev;
}

/** How many trailing dims of x normalizedShape (a number or an array; null: the last dim) names. */
function normalizedNdim(op, x, normalizedShape) {
  if (x.ndim === 0) throw invalidArgument(`${op}: x needs at least 1 dim`);
  if (normalizedShape === null || normalizedShape === undefined) return 1;
  const shape = [].concat(normalizedShape);
  if (shape.length < 1 || shape.length > x.ndim || shape.join() !== x.shape.slice(x.ndim - shape.length).join()) {
    throw invalidArgument(`${op}: normalizedShape [${shape}] is not a non-empty tail of x's shape [${x.shape}]`);
  }
  return shape.length;
}

function normParams(op, x, k, params) {
  const want = x.shape.slice(x.ndim - k);
  for (const [name, t] of Object.entries(params)) {
    if (t && t.shape.join() !== want.join()) {
      throw invalidArgument(`${op}: ${name} has shape [${t.shape}]; [${want}] (x's normalized dims) is needed`);
    }
  }
}

/**
 * Checks a loss's arguments (input [C], [N, C] or [N, C, d1, ...]; target input's shape
 * without the class dim, or, where probabilities allows, a floating target of input's
 * shape holding class probabilities); returns [device, the loss's shape, the C call's
 * arguments after target: weight (with class weights or label smoothing), reduction,
 * ignore_index, label_smoothing (when smoothing)] and the C function's suffix.
 */
function checkLoss(op, input, target, { reduction = 'mean', ignoreIndex = -100, weight = null, labelSmoothing = 0 }, probabilities) {
  const dev = onOneDevice(op, { input, target, weight });
  floating(op, { input, weight });
  const probs = probabilities && DTYPES[target.dtype].floating;
  if (probabilities && !probs && target.dtype !== 'int32' && target.dtype !== 'int64') {
    throw invalidArgument(`${op}: target has dtype ${target.dtype}; int32 or int64 (class indices) or a floating type (class probabilities) is needed`);
  }
  if (!probs) indices(op, 'target', target);
  if (input.ndim === 0) throw invalidArgument(`${op}: input is 0-dim; [C], [N, C] or [N, C, d1, ...] is needed`);
  const classes = input.ndim === 1 ? input.shape[0] : input.shape[1];
  const perSample = input.ndim === 1 ? [] : [input.shape[0], ...input.shape.slice(2)];
  if (probs && target.shape.join() !== input.shape.join()) {
    throw invalidArgument(`${op}: target has shape [${target.shape}]; [${input.shape}] is needed (class probabilities have input's shape)`);
  }
  if (!probs && target.shape.join() !== perSample.join()) {
    throw invalidArgument(`${op}: target has shape [${target.shape}]; [${perSample}] is needed (input [${input.shape}] without its class dim)`);
  }
  if (weight && weight.shape.join() !== String(classes)) {
    throw invalidArgument(`${op}: weight has shape [${weight.shape}]; [${classes}] is needed (one weight per class of input)`);
  }
  if (!(reduction in REDUCTIONS)) throw invalidArgument(`${op}: reduction '${reduction}' is not 'none', 'mean' or 'sum'`);
  if (!Number.isInteger(ignoreIndex)) throw invalidArgument(`${op}: ignoreIndex ${ignoreIndex} is not an integer`);
  if (typeof labelSmoothing !== 'number' || !(labelSmoothing >= 0 && labelSmoothing <= 1)) {
    throw invalidArgument(`${op}: labelSmoothing ${labelSmoothing} is not in [0, 1]`);
  }
  const shape = reduction === 'none' ? perSample : [];
  const tail = [REDUCTIONS[reduction], ignoreIndex];
  if (labelSmoothing) return [dev, shape, [h(weight), ...tail, labelSmoothing], 'Smoothed'];
  return weight ? [dev, shape, [weight.handle, ...tail], 'Weighted'] : [dev, shape, tail, ''];
}

// nllLoss, crossEntropy and their backwards. options.weight (a floating tensor
// [C]) scales each sample's loss by its class's weight, and 'mean' divides by
// the sum of the counted samples' weights; crossEntropy's labelSmoothing e mixes
// in e / C of every class's loss, as torch does. crossEntropy also takes class
// probabilities (torch's soft targets): a floating target of input's shape,
// sample i's loss sum_j weight[j] q[i, j] -logSoftmax(input)[i, j] with
// q = (1 - e) target + e / C, ignoreIndex unused and 'mean' over the samples.
for (const [js, c] of [['nllLoss', 'NllLoss'], ['crossEntropy', 'CrossEntropyLoss']]) {
  const check = (op, input, target, options) => {
    if (js === 'nllLoss' && options.labelSmoothing !== undefined) throw invalidArgument(`${op}: labelSmoothing is for crossEntropy only`);
    return checkLoss(op, input, target, options, js === 'crossEntropy');
  };
  ops[js] = (input, target, options = {}) => {
    const [dev, , args, kind] = check(js, input, target, options);
    return call(`${c}${kind}`, dev, [input.handle, target.handle, ...args]);
  };
  ops[`${js}Backward`] = (g, input, target, options = {}) => {
    const op = `${js}Backward`;
    const [dev, shape, args, kind] = check(op, input, target, options);
    onOneDevice(op, { g, input });
    shapeIs(op, 'the gradient', g, shape);
    return call(`${c}${kind}Backward`, dev, [g.handle, input.handle, target.handle, ...args]);
  };
}

function operand(x, like) {
  if (x instanceof Tensor) return x;
  if (typeof x === 'number') return tensor(x, { dtype: like.dtype, device: like.device });
  throw new TypeError('operand must be an hpu.Tensor or a number');
}

for (const op of BINARY) {
  ops[op] = (a, b) => {
    const ta = a instanceof Tensor ? a : operand(a, b);
    const tb = operand(b, ta);
    const dev = onOneDevice(op, { a: ta, b: tb });
    broadcastable(op, ta, tb);
    return call(cap(op), dev, [ta.handle, tb.handle]);
  };
  ops[`${op}Backward`] = (g, a, b) => call(`${cap(op)}Backward`, onOneDevice(`${op}Backward`, { g, a, b }), [g.handle, a.handle, b.handle], [true, true]);
}
for (const op of UNARY) {
  ops[op] = (x) => {
    const dev = onOneDevice(op, { x });
    floating(op, { x });
    return call(cap(op), dev, [x.handle]);
  };
  ops[`${op}Backward`] = (g, x) => {
    const dev = onOneDevice(`${op}Backward`, { g, x });
    shapeIs(`${op}Backward`, 'the gradient', g, x.shape);
    return call(`${cap(op)}Backward`, dev, [g.handle, x.handle]);
  };
}
for (const op of ['sum', 'mean']) {
  const dimsOf = (name, x, dim) => {
    const dims = dim === undefined || dim === null ? [] : [].concat(dim);
    dims.forEach((d) => dimOf(name, x, d));
    if (new Set(dims.map((d) => (d + Math.max(x.ndim, 1)) % Math.max(x.ndim, 1))).size !== dims.length) {
      throw invalidArgument(`${name}: dims [${dims}] list one twice`);
    }
    return [Int32Array.from(dims.length ? dims : [0]), dims.length];
  };
  ops[op] = (x, { dim, keepdim = false } = {}) => {
    const dev = onOneDevice(op, { x });
    if (op === 'mean') floating(op, { x });
    return call(cap(op), dev, [x.handle, ...dimsOf(op, x, dim), keepdim ? 1 : 0]);
  };
  ops[`${op}Backward`] = (g, x, { dim, keepdim = false } = {}) => {
    const dev = onOneDevice(`${op}Backward`, { g, x });
    return call(`${cap(op)}Backward`, dev, [g.handle, x.handle, ...dimsOf(`${op}Backward`, x, dim), keepdim ? 1 : 0]);
  };
}

// Tensor methods for the common ops.
for (const name of ['mm', 'bmm', 'matmul', 'add', 'sub', 'mul', 'div', ...UNARY, 'softmax', 'logSoftmax', 'sum', 'mean', 'argmax']) {
  Tensor.prototype[name] = function method(...args) { return ops[name](this, ...args); };
}

module.exports = ops;
