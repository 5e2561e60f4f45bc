'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');
const { near, values } = require('./support');

const isHpuError = (code) => (e) => e instanceof hpu.HpuError && e.code === code;

function matmulRef(a, b, m, k, n) {
  const out = new Array(m * n).fill(0);
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) for (let q = 0; q < k; q++) out[i * n + j] += a[i * k + q] * b[q * n + j];
  return out;
}

test('matrix products and linear', () => {
  const a = Array.from({ length: 6 }, (_, i) => i * 0.5 - 1);
  const b = Array.from({ length: 12 }, (_, i) => (i % 5) - 2);
  const ta = hpu.tensor(Float32Array.from(a), { shape: [2, 3] });
  const tb = hpu.tensor(Float32Array.from(b), { shape: [3, 4] });
  near(hpu.mm(ta, tb), matmulRef(a, b, 2, 3, 4));
  near(ta.matmul(tb), matmulRef(a, b, 2, 3, 4));
  const w = hpu.tensor(Float32Array.from(b), { shape: [4, 3] });
  const bias = hpu.tensor([1, 2, 3, 4]);
  const wt = [0, 1, 2].flatMap((q) => [0, 1, 2, 3].map((o) => b[o * 3 + q]));
  near(hpu.linear(ta, w, bias), matmulRef(a, wt, 2, 3, 4).map((v, i) => v + [1, 2, 3, 4][i % 4]));
  const [ga, gb] = hpu.ops.mmBackward(hpu.ones([2, 4]), ta, tb);
  assert.deepEqual([ga.shape, gb.shape], [[2, 3], [3, 4]]);
  // libhpu's checks: the C status and message, which names the C function and argument.
  assert.throws(() => hpu.mm(ta, ta), (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) &&
    e.message === 'hpuMm: a is f32[2, 3] and b is f32[2, 3]: the inner sizes differ (3 vs 2)');
  assert.throws(() => hpu.mm(ta, hpu.zeros([3, 4], { device: 1 })), (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) &&
    e.message === 'hpuMm: b is on device 1 but a is on device 0');
  assert.throws(() => hpu.mm(ta, [[1]]), { name: 'TypeError', message: 'hpuMm: b must be an hpu.Tensor' });
});

test('elementwise ops, broadcasting and scalars', () => {
  const a = hpu.tensor([[1], [2]]);
  const b = hpu.tensor([10, 20, 30]);
  assert.deepEqual(hpu.add(a, b).toList(), [[11, 21, 31], [12, 22, 32]]);
  assert.deepEqual(a.mul(2).toList(), [[2], [4]]);
  assert.deepEqual(hpu.sub(1, a).toList(), [[0], [-1]]);
  near(hpu.div(b, 4), [2.5, 5, 7.5]);
  near(hpu.relu(hpu.tensor([-1, 0.5])), [0, 0.5]);
  near(hpu.ops.exp(hpu.tensor([0, 1])), [1, Math.E]);
  near(hpu.ops.tanh(hpu.tensor([0.5])), [Math.tanh(0.5)]);
  assert.throws(() => hpu.add(hpu.zeros([2, 3]), hpu.zeros([4])), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.relu(hpu.zeros([2], { dtype: 'int32' })), isHpuError('HPU_ERROR_UNSUPPORTED'));
});

test('softmax, cross entropy, reductions', () => {
  const x = [1, 2, 3, 1, 1, 1];
  const sm = (row) => { const e = row.map(Math.exp); const s = e.reduce((p, q) => p + q); return e.map((v) => v / s); };
  near(hpu.softmax(hpu.tensor([x.slice(0, 3), x.slice(3)]), 1), [...sm(x.slice(0, 3)), ...sm(x.slice(3))]);
  const logits = hpu.tensor([x.slice(0, 3), x.slice(3)]);
  const target = hpu.tensor(BigInt64Array.from([2n, 0n]));
  const loss = hpu.crossEntropy(logits, target);
  near(loss, [-(Math.log(sm(x.slice(0, 3))[2]) + Math.log(1 / 3)) / 2]);
  assert.throws(() => hpu.crossEntropy(logits, hpu.tensor([2, 0])), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.crossEntropy(logits, target, { reduction: 'avg' }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  const t = hpu.tensor([[1, 2, 3], [4, 5, 6]]);
  near(t.sum(), [21]);
  near(hpu.ops.sum(t, { dim: 0 }), [5, 7, 9]);
  near(hpu.ops.mean(t, { dim: -1, keepdim: true }), [2, 5]);
  assert.deepEqual(hpu.ops.mean(t, { dim: -1, keepdim: true }).shape, [2, 1]);
});

// log_softmax of each of n rows of c values.
const logSoftmaxRows = (x, n, c) => Array.from({ length: n }, (_, i) => {
  const row = x.slice(i * c, i * c + c);
  const m = Math.max(...row);
  const lse = m + Math.log(row.reduce((s, v) => s + Math.exp(v - m), 0));
  return row.map((v) => v - lse);
});

test('class-weighted cross entropy and nll loss against a reference', () => {
  const n = 6, c = 4;
  const x = values(n * c, 3);
  const y = [0, 3, 1, -100, 2, 3];
  const w = [0.5, 2, 1, 3];
  const logp = logSoftmaxRows(x, n, c);
  const kept = y.map((t, i) => i).filter((i) => y[i] !== -100);
  const per = y.map((t, i) => (t === -100 ? 0 : -logp[i][t] * w[t]));
  const total = kept.reduce((s, i) => s + per[i], 0);
  const wsum = kept.reduce((s, i) => s + w[y[i]], 0);
  const input = hpu.tensor(Float32Array.from(x), { shape: [n, c] });
  const target = hpu.tensor(BigInt64Array.from(y.map(BigInt)));
  for (const weight of [hpu.tensor(w), hpu.tensor(Float64Array.from(w))]) {
    near(hpu.crossEntropy(input, target, { weight }), [total / wsum]);
    near(hpu.crossEntropy(input, target, { weight, reduction: 'sum' }), [total]);
    near(hpu.crossEntropy(input, target, { weight, reduction: 'none' }), per);
    near(hpu.ops.nllLoss(hpu.tensor(Float32Array.from(logp.flat()), { shape: [n, c] }), target, { weight }), [total / wsum]);
  }
  const weight = hpu.tensor(w);
  // d(mean)/d logits: (softmax - onehot) w[y_i] / sum of the counted weights; ignored rows 0.
  const grad = (scaleOf) => logp.flatMap((row, i) => row.map((lp, j) => (y[i] === -100 ? 0
    : (Math.exp(lp) - (j === y[i] ? 1 : 0)) * w[y[i]] * scaleOf(i))));
  near(hpu.ops.crossEntropyBackward(hpu.tensor(2), input, target, { weight }), grad(() => 2 / wsum));
  const g = values(n, 5);
  near(hpu.ops.crossEntropyBackward(hpu.tensor(g), input, target, { weight, reduction: 'none' }), grad((i) => g[i]));
  const nllGrad = logp.flatMap((row, i) => row.map((_, j) => (y[i] !== -100 && j === y[i] ? -w[y[i]] : 0)));
  near(hpu.ops.nllLossBackward(hpu.tensor(1), input, target, { weight, reduction: 'sum' }), nllGrad);
  near(hpu.crossEntropy(input, target, { weight: hpu.ones([c]) }), hpu.crossEntropy(input, target).data());
});

test('class-weighted losses name a bad argument and its value', () => {
  const input = hpu.zeros([4, 3]);
  const target = hpu.tensor(BigInt64Array.from([0n, 1n, 2n, 1n]));
  const invalid = (message) => (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) && e.message === message;
  for (const [op, c] of [['nllLoss', 'hpuNllLoss'], ['crossEntropy', 'hpuCrossEntropyLoss']]) {
    assert.throws(() => hpu.ops[op](input, target, { weight: hpu.ones([4]) }),
      invalid(`${c}: weight is f32[4]: expected shape [3] (one weight per class of input)`));
    assert.throws(() => hpu.ops[op](input, target, { weight: hpu.tensor(Int32Array.from([1, 2, 3])) }),
      (e) => isHpuError('HPU_ERROR_UNSUPPORTED')(e) && e.message === `${c}: weight is i32[3]: a floating type (f16, bf16, f32, f64) is required`);
    assert.throws(() => hpu.ops[op](input, target, { weight: [1, 2, 3] }), { name: 'TypeError', message: `${c}: weight must be an hpu.Tensor` });
    assert.throws(() => hpu.ops[op](input, target, { weight: hpu.ones([3], { device: 1 }) }),
      invalid(`${c}: weight is on device 1 but input is on device 0`));
    assert.throws(() => hpu.ops[op](input, target, { weight: hpu.ones([3]), ignoreIndex: 1.5 }),
      { name: 'TypeError', message: `${c}: options->ignore_index must be an integer, not 1.5` });
  }
  assert.throws(() => hpu.ops.crossEntropyBackward(hpu.ones([4]), input, target, { weight: hpu.ones([3]) }),
    invalid("hpuCrossEntropyLossBackward: grad_loss is f32[4]: expected shape [] (the forward's loss shape)"));
});

test('spatial losses and label smoothing against a reference', () => {
  // input [N, C, L] = [2, 3, 2], target [N, L]; one target ignored.
  const [n, c, l] = [2, 3, 2];
  const x = values(n * c * l, 19);
  const y = [[2, 0], [-100, 1]];
  const w = [0.5, 2, 1];
  const at = (i, j, k) => x[(i * c + j) * l + k];
  const rows = [];  // [logp over classes, target] per position
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < l; k++) rows.push([logSoftmaxRows(Array.from({ length: c }, (_, j) => at(i, j, k)), 1, c)[0], y[i][k]]);
  }
  const per = rows.map(([lp, t]) => (t === -100 ? 0 : -lp[t] * w[t]));
  const input = hpu.tensor(Float32Array.from(x), { shape: [n, c, l] });
  const target = hpu.tensor(BigInt64Array.from(y.flat().map(BigInt)), { shape: [n, l] });
  const weight = hpu.tensor(w);
  const none = hpu.crossEntropy(input, target, { weight, reduction: 'none' });
  assert.deepEqual(none.shape, [n, l]);
  near(none, per);
  const wsum = rows.reduce((s, [, t]) => s + (t === -100 ? 0 : w[t]), 0);
  near(hpu.crossEntropy(input, target, { weight }), [per.reduce((a, b) => a + b) / wsum]);
  assert.deepEqual(hpu.ops.crossEntropyBackward(hpu.ones([n, l]), input, target, { reduction: 'none' }).shape, [n, c, l]);
  assert.throws(() => hpu.crossEntropy(input, hpu.tensor(BigInt64Array.from([0n, 1n]))), (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) &&
    e.message === 'hpuCrossEntropyLoss: target is i64[2]: expected shape [2, 2] (one class per sample of input)');

  // Label smoothing e: (1 - e) * the weighted loss + e / C * sum_j w[j] * -logp[j]; mean over the target weights.
  const e = 0.3;
  const smooth = rows.map(([lp, t]) => (t === -100 ? 0 : (1 - e) * -lp[t] * w[t] + (e / c) * lp.reduce((s, v, j) => s - v * w[j], 0)));
  near(hpu.crossEntropy(input, target, { weight, labelSmoothing: e, reduction: 'none' }), smooth);
  near(hpu.crossEntropy(input, target, { weight, labelSmoothing: e }), [smooth.reduce((a, b) => a + b) / wsum]);
  const grad = hpu.ops.crossEntropyBackward(hpu.tensor(1), input, target, { weight, labelSmoothing: e });
  const want = new Array(n * c * l).fill(0);
  rows.forEach(([lp, t], r) => {
    if (t === -100) return;
    const [i, k] = [Math.floor(r / l), r % l];
    const wAll = w.reduce((a, b) => a + b);
    lp.forEach((v, j) => {
      want[(i * c + j) * l + k] = ((1 - e) * w[t] * (Math.exp(v) - (j === t ? 1 : 0)) + (e / c) * (wAll * Math.exp(v) - w[j])) / wsum;
    });
  });
  near(grad, want);
  assert.throws(() => hpu.crossEntropy(input, target, { labelSmoothing: 1.5 }), (e2) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e2) &&
    e2.message === 'hpuCrossEntropyLoss: options->label_smoothing 1.5 is not in 0..1');
  assert.throws(() => hpu.ops.nllLoss(input, target, { labelSmoothing: 0.1 }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  // One sample: input [C], target 0-dim.
  const one = logSoftmaxRows([0.5, -1, 2], 1, 3)[0];
  near(hpu.ops.nllLoss(hpu.tensor(one), hpu.tensor(BigInt64Array.from([1n]), { shape: [] })), [-one[1]]);
});

test('class-probability targets against a reference', () => {
  // torch's soft targets: sum_j w[j] ((1 - e) p[j] + e / C) -logp[j]; 'mean' divides by the samples.
  const [n, c, l] = [2, 3, 2];
  const x = values(n * c * l, 23);
  const p = values(n * c * l, 24).map((v) => (v + 1) / 2);
  const w = [0.5, 2, 1];
  const e = 0.2;
  const input = hpu.tensor(Float32Array.from(x), { shape: [n, c, l] });
  const target = hpu.tensor(Float32Array.from(p), { shape: [n, c, l] });
  const weight = hpu.tensor(w);
  const idx = (i, j, k) => (i * c + j) * l + k;
  const per = [];
  const want = new Array(n * c * l).fill(0);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < l; k++) {
      const lp = logSoftmaxRows(Array.from({ length: c }, (_, j) => x[idx(i, j, k)]), 1, c)[0];
      const wq = lp.map((_, j) => w[j] * ((1 - e) * p[idx(i, j, k)] + e / c));
      per.push(wq.reduce((s, v, j) => s - v * lp[j], 0));
      const wqSum = wq.reduce((a, b) => a + b);
      lp.forEach((v, j) => { want[idx(i, j, k)] = (wqSum * Math.exp(v) - wq[j]) / (n * l); });
    }
  }
  const none = hpu.crossEntropy(input, target, { weight, labelSmoothing: e, reduction: 'none' });
  assert.deepEqual(none.shape, [n, l]);
  near(none, per);
  near(hpu.crossEntropy(input, target, { weight, labelSmoothing: e, ignoreIndex: 0 }), [per.reduce((a, b) => a + b) / (n * l)]);
  near(hpu.ops.crossEntropyBackward(hpu.tensor(1), input, target, { weight, labelSmoothing: e }), want);
  assert.throws(() => hpu.crossEntropy(input, hpu.zeros([n, l, c])), (err) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(err) &&
    err.message === "hpuCrossEntropyLoss: target is f32[2, 2, 3]: expected shape [2, 3, 2] (class probabilities have the input's shape; class indices are i32 or i64)");
  assert.throws(() => hpu.crossEntropy(input, hpu.zeros([n, c, l], { dtype: 'uint8' })), (err) => isHpuError('HPU_ERROR_UNSUPPORTED')(err) &&
    err.message === 'hpuCrossEntropyLoss: target is u8[2, 3, 2]: indices must be i32 or i64');
  assert.throws(() => hpu.ops.nllLoss(input, target), (err) => isHpuError('HPU_ERROR_UNSUPPORTED')(err) &&
    err.message === `hpuNllLoss: target is f32[${target.shape.join(', ')}]: indices must be i32 or i64`);
});

test('layer norm over trailing dims against a reference', () => {
  const [a, b, c] = [3, 2, 4];
  const d = b * c;
  const x = values(a * d, 7);
  const w = values(d, 11);
  const bias = values(d, 13);
  const g = values(a * d, 17);
  const rows = Array.from({ length: a }, (_, i) => x.slice(i * d, i * d + d));
  const mu = rows.map((r) => r.reduce((s, v) => s + v, 0) / d);
  const rstd = rows.map((r, i) => 1 / Math.sqrt(r.reduce((s, v) => s + (v - mu[i]) ** 2, 0) / d + 1e-5));
  const xhat = rows.map((r, i) => r.map((v) => (v - mu[i]) * rstd[i]));
  const tx = hpu.tensor(Float32Array.from(x), { shape: [a, b, c] });
  const tw = hpu.tensor(Float32Array.from(w), { shape: [b, c] });
  const tb = hpu.tensor(Float32Array.from(bias), { shape: [b, c] });
  const [y, mean, rs] = hpu.ops.layerNorm(tx, { weight: tw, bias: tb, normalizedShape: [b, c], returnStats: true });
  assert.deepEqual([y.shape, mean.shape, rs.shape], [[a, b, c], [a], [a]]);
  near(y, xhat.flatMap((r) => r.map((v, j) => v * w[j] + bias[j])), 1e-3);
  near(mean, mu);
  near(rs, rstd, 1e-3);
  near(hpu.ops.layerNorm(tx, { normalizedShape: c }), hpu.ops.layerNorm(tx).data());
  const [gx, gw, gb] = hpu.ops.layerNormBackward(hpu.tensor(Float32Array.from(g), { shape: [a, b, c] }), tx, mean, rs, tw);
  const want = xhat.flatMap((r, i) => {
    const gh = r.map((_, j) => g[i * d + j] * w[j]);
    const m1 = gh.reduce((s, v) => s + v, 0) / d;
    const m2 = gh.reduce((s, v, j) => s + v * r[j], 0) / d;
    return r.map((v, j) => (gh[j] - m1 - v * m2) * rstd[i]);
  });
  near(gx, want, 1e-3);
  near(gw, w.map((_, j) => xhat.reduce((s, r, i) => s + g[i * d + j] * r[j], 0)), 1e-3);
  near(gb, w.map((_, j) => rows.reduce((s, r, i) => s + g[i * d + j], 0)), 1e-3);
  assert.deepEqual([gw.shape, gb.shape], [[b, c], [b, c]]);
});

test('layer norm over trailing dims names a bad argument and its value', () => {
  const x = hpu.zeros([3, 2, 4]);
  const invalid = (message) => (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) && e.message === message;
  assert.throws(() => hpu.ops.layerNorm(x, { normalizedShape: [4, 2] }),
    invalid("layerNorm: normalizedShape [4,2] is not a non-empty tail of x's shape [3,2,4]"));
  assert.throws(() => hpu.ops.layerNorm(x, { normalizedShape: [1, 3, 2, 4] }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.ops.layerNorm(x, { normalizedShape: [] }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.ops.layerNorm(x, { weight: hpu.ones([4]), normalizedShape: [2, 4] }),
    invalid("hpuLayerNorm: weight is f32[4]: expected shape [2, 4] (x's normalized dims)"));
  assert.throws(() => hpu.ops.layerNorm(x, { eps: -1 }), invalid('hpuLayerNorm: options->eps -1 is not a finite number >= 0'));
  const [, mean, rstd] = hpu.ops.layerNorm(x, { normalizedShape: [2, 4], returnStats: true });
  assert.throws(() => hpu.ops.layerNormBackward(x, x, hpu.zeros([2]), rstd),
    invalid("hpuLayerNormBackward: mean is f32[2]: expected shape [3] (x's shape without the normalized dims)"));
  assert.throws(() => hpu.ops.layerNormBackward(x, x, mean, rstd, hpu.ones([4])),
    invalid("hpuLayerNormBackward: weight is f32[4]: expected shape [2, 4] (x's normalized dims)"));
});

test('argmax, squaredNorm, scaleInplace', () => {
  const x = hpu.tensor([[1, 9, 3, 9], [-1, -5, 0, -2], [2, 2, 2, 2]]);
  const idx = hpu.argmax(x, { dim: 1 });
  assert.equal(idx.dtype, 'int64');
  assert.deepEqual(Array.from(idx.data(), Number), [1, 2, 0]);  // ties: the first
  assert.deepEqual(Array.from(x.argmax({ dim: 0, keepdim: true }).data(), Number), [2, 0, 0, 0]);
  assert.deepEqual(x.argmax({ dim: 0, keepdim: true }).shape, [1, 4]);
  assert.equal(Number(hpu.argmax(x).data()[0]), 1);
  assert.deepEqual(hpu.argmax(x, { keepdim: true }).shape, [1, 1]);
  const invalid = (message) => (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) && e.message === message;
  const unsupported = (message) => (e) => isHpuError('HPU_ERROR_UNSUPPORTED')(e) && e.message === message;
  assert.throws(() => hpu.argmax(x, { dim: 2 }), invalid('hpuArgmax: dim 2 is out of range for 2 dims (-2..1)'));
  assert.throws(() => hpu.argmax(hpu.zeros([3, 0]), { dim: 1 }), invalid('hpuArgmax: x is f32[3, 0]: dim 1 is empty, so it has no largest element'));
  assert.throws(() => hpu.argmax(hpu.zeros([0])), invalid('hpuArgmax: x is f32[0]: dim 0 is empty, so it has no largest element'));
  assert.throws(() => hpu.argmax(hpu.zeros([2], { dtype: 'bool' })), unsupported('hpuArgmax: x is bool[2]: argmax needs a numeric type'));

  const a = [1.5, -2, 0.25];
  const b = [3, 4];
  near(hpu.ops.squaredNorm([hpu.tensor(a), hpu.tensor(b).to('bfloat16')]), [2.25 + 4 + 0.0625 + 9 + 16], 1e-6);
  near(hpu.ops.squaredNorm(hpu.tensor(b)), [25]);
  assert.throws(() => hpu.ops.squaredNorm([]), invalid('hpuSquaredNorm: count is 0: at least one tensor is needed (it names the device)'));
  assert.throws(() => hpu.ops.squaredNorm([hpu.tensor(a), hpu.zeros([2], { dtype: 'int32' })]),
    unsupported('hpuSquaredNorm: tensors[1] is i32[2]: a floating type (f16, bf16, f32, f64) is required'));
  const t = hpu.tensor(a);
  assert.equal(hpu.ops.scaleInplace(t, -2), t);
  near(t, [-3, 4, -0.5]);
  assert.throws(() => hpu.ops.scaleInplace(hpu.zeros([2, 3]).transpose(0, 1), 2),
    invalid('hpuScaleInplace: x is f32[3, 2] with strides [1, 3]: it must be contiguous'));
  assert.throws(() => hpu.ops.scaleInplace(t, '2'), { name: 'TypeError', message: 'hpuScaleInplace: alpha must be a number, not "2"' });
});

test('autocast decides output dtypes, across awaits', async () => {
  const a = hpu.tensor([[1, 2], [3, 4]]);
  const r = hpu.autocast({ dtype: 'bfloat16' }, () => [hpu.mm(a, a).dtype, hpu.ops.tan(a.to('bfloat16')).dtype,
    hpu.add(a.to('bfloat16'), a).dtype, hpu.relu(a).dtype]);
  assert.deepEqual(r, ['bfloat16', 'float32', 'float32', 'float32']);
  assert.equal(hpu.mm(a, a).dtype, 'float32');
  const later = await hpu.autocast(async () => {
    await new Promise((resolve) => setImmediate(resolve));
    return hpu.mm(a, a).dtype;
  });
  assert.equal(later, 'bfloat16');
  assert.deepEqual(hpu.autocast(() => hpu.mm(a, a)).toList(), [[7, 10], [15, 22]]);
});

test('optimizer steps', () => {
  const param = hpu.tensor([1, 2, 3]);
  const grad = hpu.tensor([0.5, -0.5, 1]);
  hpu.ops.sgdStep(param, grad, null, { step: 1, lr: 0.1 });
  near(param, [0.95, 2.05, 2.9]);
  assert.throws(() => hpu.ops.sgdStep(param, grad, null, { step: 0 }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  const m = hpu.zeros([3]);
  const v = hpu.zeros([3]);
  hpu.ops.adamwStep(param, grad, m, v, { step: 1, lr: 0.01, weightDecay: 0 });
  near(param, [0.94, 2.06, 2.89], 1e-5);
  const copy = hpu.zeros([3], { dtype: 'bfloat16' });
  hpu.ops.adamwStep(param, grad, m, v, { step: 2, lr: 0.01, weightDecay: 0, paramCopy: copy });
  assert.deepEqual(copy.toList(), hpu.ops.cast(param, 'bfloat16').toList());
  assert.throws(() => hpu.ops.adamwStep(param, grad, m, v, { step: 3, paramCopy: hpu.zeros([3]) }),
    isHpuError('HPU_ERROR_UNSUPPORTED'));
  assert.throws(() => hpu.ops.adamwStep(param, grad, m, v, { step: 3, paramCopy: hpu.zeros([2], { dtype: 'bfloat16' }) }),
    isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});
