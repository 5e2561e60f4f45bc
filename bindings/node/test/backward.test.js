'use strict';
// The ops the other files do not reach, and every backward, against references
// written out here (or, for gelu's derivative, central differences of the
// float64 forward, itself checked against erf).
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');
const { near, values } = require('./support');

const f32 = (data, shape) => hpu.tensor(Float32Array.from(data), { shape });
const f64 = (data, shape) => hpu.tensor(Float64Array.from(data), { shape });
// [m, k] x [k, n], row-major; t transposes a [r, c] matrix.
const mm = (a, b, m, k, n) => Array.from({ length: m * n }, (_, i) => {
  let s = 0;
  for (let q = 0; q < k; q++) s += a[Math.floor(i / n) * k + q] * b[q * n + (i % n)];
  return s;
});
const t = (a, r, c) => Array.from({ length: r * c }, (_, i) => a[(i % r) * c + Math.floor(i / r)]);
// erf to 1.5e-7 (Abramowitz and Stegun 7.1.26).
function erf(x) {
  const s = Math.sign(x);
  const z = 1 / (1 + 0.3275911 * Math.abs(x));
  const p = z * (0.254829592 + z * (-0.284496736 + z * (1.421413741 + z * (-1.453152027 + z * 1.061405429))));
  return s * (1 - p * Math.exp(-x * x));
}

test('products and their backwards', () => {
  const [m, k, n] = [2, 3, 4];
  const a = values(2 * m * k, 3);
  const b = values(2 * k * n, 5);
  const g = values(2 * m * n, 7);
  const half = (v, i, size) => v.slice(i * size, (i + 1) * size);
  const ta = f32(a, [2, m, k]);
  const tb = f32(b, [2, k, n]);
  near(hpu.ops.bmm(ta, tb), [0, 1].flatMap((i) => mm(half(a, i, m * k), half(b, i, k * n), m, k, n)));
  const [ga, gb] = hpu.ops.bmmBackward(f32(g, [2, m, n]), ta, tb);
  near(ga, [0, 1].flatMap((i) => mm(half(g, i, m * n), t(half(b, i, k * n), k, n), m, n, k)));
  near(gb, [0, 1].flatMap((i) => mm(t(half(a, i, m * k), m, k), half(g, i, m * n), k, m, n)));
  // matmul broadcasts w [k, n] over a's batch: its gradient sums over the batch.
  const w = half(b, 0, k * n);
  const [, gw] = hpu.ops.matmulBackward(f32(g, [2, m, n]), ta, f32(w, [k, n]));
  const per = [0, 1].map((i) => mm(t(half(a, i, m * k), m, k), half(g, i, m * n), k, m, n));
  near(gw, per[0].map((v, i) => v + per[1][i]));
  const bias = values(n, 11);
  const a2 = half(a, 0, m * k);
  const g2 = half(g, 0, m * n);
  near(hpu.ops.addmm(f32(bias, [n]), f32(a2, [m, k]), f32(w, [k, n]), { beta: 0.5, alpha: 2 }),
    mm(a2, w, m, k, n).map((v, i) => 2 * v + 0.5 * bias[i % n]));
  const [gbias, ga2, gw2] = hpu.ops.addmmBackward(f32(g2, [m, n]), f32(bias, [n]), f32(a2, [m, k]), f32(w, [k, n]), { beta: 0.5, alpha: 2 });
  near(gbias, bias.map((_, j) => 0.5 * (g2[j] + g2[n + j])));
  near(ga2, mm(g2, t(w, k, n), m, n, k).map((v) => 2 * v));
  near(gw2, mm(t(a2, m, k), g2, k, m, n).map((v) => 2 * v));
  // linear: x [m, k] @ W^T with W [n, k].
  const W = t(w, k, n);
  const [gx, gW, gB] = hpu.ops.linearBackward(f32(g2, [m, n]), f32(a2, [m, k]), f32(W, [n, k]));
  near(gx, mm(g2, W, m, n, k));
  near(gW, mm(t(g2, m, n), a2, n, m, k));
  near(gB, [0, 1, 2, 3].map((j) => g2[j] + g2[n + j]));
  assert.equal(hpu.ops.linearBackward(f32(g2, [m, n]), f32(a2, [m, k]), f32(W, [n, k]), false)[2], null);
});

test('elementwise backwards reduce over broadcast dims', () => {
  const a = values(6, 3);
  const b = values(3, 5).map((v) => Math.abs(v) + 0.5);
  const g = values(6, 7);
  const col = (f) => [0, 1, 2].map((j) => f(j) + f(j + 3));
  const want = {
    add: [g, col((i) => g[i])],
    sub: [g, col((i) => -g[i])],
    mul: [g.map((v, i) => v * b[i % 3]), col((i) => g[i] * a[i])],
    div: [g.map((v, i) => v / b[i % 3]), col((i) => (-g[i] * a[i]) / b[i % 3] ** 2)],
  };
  for (const [op, [wa, wb]] of Object.entries(want)) {
    const [ga, gb] = hpu.ops[`${op}Backward`](f32(g, [2, 3]), f32(a, [2, 3]), f32(b, [3]));
    assert.deepEqual([ga.shape, gb.shape], [[2, 3], [3]], op);
    near(ga, wa);
    near(gb, wb);
  }
  const dst = f32([1, 2, 3], [3]);
  assert.equal(hpu.ops.addInplace(dst, f32([1, 1, 1], [3]), -2), dst);
  near(dst, [-1, 0, 1]);
});

test('unary ops and their backwards', () => {
  const x = values(20, 3).map((v) => v * 0.7);
  const pos = x.map((v) => Math.abs(v) + 0.1);
  const g = values(20, 7);
  const sig = (v) => 1 / (1 + Math.exp(-v));
  const gelu = (v) => 0.5 * v * (1 + erf(v / Math.SQRT2));
  near(hpu.ops.sigmoid(f32(x)), x.map(sig));
  near(hpu.gelu(f32(x)), x.map(gelu), 1e-5);
  const cases = {
    exp: [x, (v) => Math.exp(v)], log: [pos, (v) => 1 / v], tan: [x, (v) => 1 + Math.tan(v) ** 2],
    tanh: [x, (v) => 1 - Math.tanh(v) ** 2], sigmoid: [x, (v) => sig(v) * (1 - sig(v))], relu: [x, (v) => (v > 0 ? 1 : 0)],
  };
  for (const [op, [input, d]] of Object.entries(cases)) near(hpu.ops[`${op}Backward`](f32(g), f32(input)), input.map((v, i) => g[i] * d(v)));
  // gelu': central differences of the float64 forward.
  const h = 1e-5;
  const fwd = (shift) => Array.from(hpu.gelu(f64(x.map((v) => v + shift))).data());
  const [up, down] = [fwd(h), fwd(-h)];
  near(hpu.ops.geluBackward(f64(g), f64(x)), g.map((v, i) => (v * (up[i] - down[i])) / (2 * h)), 1e-6);
});

test('softmax family, dropout, embedding, cast and reductions: backwards', () => {
  const x = values(8, 3);
  const g = values(8, 7);
  const rows = [x.slice(0, 4), x.slice(4)];
  const lse = rows.map((r) => Math.log(r.reduce((s, v) => s + Math.exp(v), 0)));
  const logp = rows.flatMap((r, i) => r.map((v) => v - lse[i]));
  const out = hpu.ops.logSoftmax(f32(x, [2, 4]), 1);
  near(out, logp);
  const gsum = [0, 1].map((i) => g.slice(i * 4, i * 4 + 4).reduce((s, v) => s + v, 0));
  near(hpu.ops.logSoftmaxBackward(f32(g, [2, 4]), out, 1), g.map((v, i) => v - Math.exp(logp[i]) * gsum[Math.floor(i / 4)]));
  const sm = hpu.softmax(f32(x, [2, 4]), 1);
  const p = logp.map(Math.exp);
  const dot = [0, 1].map((i) => [0, 1, 2, 3].reduce((s, j) => s + g[i * 4 + j] * p[i * 4 + j], 0));
  near(hpu.ops.softmaxBackward(f32(g, [2, 4]), sm, 1), p.map((v, i) => v * (g[i] - dot[Math.floor(i / 4)])));
  assert.equal(hpu.ops.softmaxBackward(f32(g, [2, 4]), sm, 1, 'bfloat16').dtype, 'bfloat16');

  const [kept, mask] = hpu.ops.dropout(hpu.ones([1000]), { p: 0.25, returnMask: true });
  const m = Array.from(mask.data());
  near(kept, m.map((v) => v / 0.75), 1e-6);
  assert.ok(Math.abs(m.reduce((s, v) => s + v, 0) / 1000 - 0.75) < 0.06);
  near(hpu.ops.dropout(hpu.ones([4]), { training: false }), [1, 1, 1, 1]);
  near(hpu.ops.dropout(hpu.ones([4]), { p: 1 }), [0, 0, 0, 0]);  // libhpu's range: p in [0, 1]
  assert.throws(() => hpu.ops.dropout(hpu.ones([4]), { p: 1.5 }),
    (e) => e.code === 'HPU_ERROR_INVALID_ARGUMENT' && e.message === 'hpuDropout: p 1.5 is not a probability in [0, 1]');
  near(hpu.ops.dropoutBackward(f32(values(1000, 3)), mask, 0.25), values(1000, 3).map((v, i) => (v * m[i]) / 0.75), 1e-5);

  const weight = values(15, 5);
  const idx = hpu.tensor(BigInt64Array.from([4n, 0n, 4n]));
  near(hpu.ops.embedding(idx, f32(weight, [5, 3])), [4, 0, 4].flatMap((r) => weight.slice(r * 3, r * 3 + 3)));
  near(hpu.ops.embeddingBackward(hpu.ones([3, 3]), idx, f32(weight, [5, 3])), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2]);
  near(hpu.ops.embeddingBackward(hpu.ones([3, 3]), idx, f32(weight, [5, 3]), 4), [1, 1, 1, ...new Array(12).fill(0)]);

  const c = hpu.ops.cast(f32([1.5, -2.25], [2]), 'bfloat16');
  assert.equal(c.dtype, 'bfloat16');
  const gc = hpu.ops.castBackward(c, f32([0, 0], [2]));
  assert.equal(gc.dtype, 'float32');
  near(gc, [1.5, -2.25], 0);

  const x3 = f32(values(24, 3), [2, 3, 4]);
  const g2 = values(8, 7);
  near(hpu.ops.sumBackward(f32(g2, [2, 4]), x3, { dim: 1 }), [0, 1].flatMap((i) => [0, 1, 2].flatMap(() => g2.slice(i * 4, i * 4 + 4))));
  near(hpu.ops.meanBackward(f32(g2, [2, 1, 4]), x3, { dim: 1, keepdim: true }),
    [0, 1].flatMap((i) => [0, 1, 2].flatMap(() => g2.slice(i * 4, i * 4 + 4).map((v) => v / 3))));
});

test('library path, DeviceMemory and the autocast list names', () => {
  assert.match(hpu.libraryPath, /libhpu\.so/);
  const mem = hpu.memAlloc(1024);
  assert.ok(mem instanceof hpu.DeviceMemory);
  mem.free();
  assert.deepEqual([...hpu.AUTOCAST_LISTS], ['lower_precision', 'fp32', 'promote']);
});
