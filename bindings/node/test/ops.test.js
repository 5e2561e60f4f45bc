'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');

const isHpuError = (code) => (e) => e instanceof hpu.HpuError && e.code === code;

function near(got, want, tol = 1e-4) {
  const g = Array.from(got instanceof hpu.Tensor ? got.data() : got);
  assert.equal(g.length, want.length);
  g.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= tol * (1 + Math.abs(want[i])), `[${i}] ${v} vs ${want[i]}`));
}

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
  assert.throws(() => hpu.mm(ta, ta), (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) &&
    e.message === 'mm: inner dims differ: a.shape[1] is 3 but b.shape[0] is 2');
  assert.throws(() => hpu.mm(ta, hpu.zeros([3, 4], { device: 1 })), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.mm(ta, [[1]]), TypeError);
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
  assert.throws(() => hpu.relu(hpu.zeros([2], { dtype: 'int32' })), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
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
});
