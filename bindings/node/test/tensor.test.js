'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');

const isHpuError = (code) => (e) => e instanceof hpu.HpuError && e.code === code;

/** Round-to-nearest-even bfloat16 bits of a float32 (reference). */
function bf16Bits(x) {
  const bits = new Uint32Array(new Float32Array([x]).buffer)[0];
  return (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
}

test('typed arrays give their dtype', () => {
  const cases = [[Float32Array, 'float32'], [Float64Array, 'float64'], [Int32Array, 'int32'], [Uint32Array, 'uint32'],
    [Int8Array, 'int8'], [Uint8Array, 'uint8']];
  for (const [Array_, dtype] of cases) {
    const t = hpu.tensor(Array_.from([0, 1, 2, 3, 4, 5]), { shape: [2, 3], device: 1 });
    assert.equal(t.dtype, dtype);
    assert.deepEqual(t.shape, [2, 3]);
    assert.equal(t.device.index, 1);
    assert.deepEqual(t.data(), Array_.from([0, 1, 2, 3, 4, 5]));
    t.release();
  }
  const big = hpu.tensor(BigInt64Array.from([1n, -2n, 3n]));
  assert.equal(big.dtype, 'int64');
  assert.deepEqual(big.data(), BigInt64Array.from([1n, -2n, 3n]));
  assert.throws(() => hpu.tensor(new Uint16Array(2)), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});

test('arrays of numbers, booleans and bigints', () => {
  assert.equal(hpu.tensor([1, 2]).dtype, 'float32');
  assert.equal(hpu.tensor([true]).dtype, 'bool');
  assert.deepEqual(hpu.tensor([[true, false]]).toList(), [[true, false]]);
  assert.equal(hpu.tensor([[1n]]).dtype, 'int64');
  const t = hpu.tensor(2.5);
  assert.deepEqual(t.shape, []);
  assert.equal(t.item(), 2.5);
  for (const dtype of hpu.DTYPES.filter((d) => d !== 'bool')) {
    assert.deepEqual(hpu.tensor([[0, 1, 2], [3, 4, 5]], { dtype }).toList(), [[0, 1, 2], [3, 4, 5]].map(
      (row) => row.map((v) => (dtype.endsWith('int64') ? BigInt(v) : v))), dtype);
  }
  assert.throws(() => hpu.tensor([[1, 2], [3]]), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.tensor(['a']), TypeError);
});

test('bfloat16 rounds to nearest even', () => {
  const xs = [1.0, 1.00390625, 1.01171875, -3.14159, 65504.0, 1e-3, 3.0e38];
  const t = hpu.tensor(xs, { dtype: 'bfloat16' });
  const raw = Array.from(new Uint16Array(new Uint8Array(t.bytes()).buffer));
  assert.deepEqual(raw, xs.map(bf16Bits));
  const back = Array.from(t.data());
  assert.deepEqual(back, raw.map((b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]));
});

test('frombuffer and bytes', () => {
  const raw = Buffer.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  const t = hpu.frombuffer(raw, 'bfloat16', [2, 3]);
  assert.deepEqual(t.bytes(), raw);
  const i = hpu.frombuffer(new Int32Array([1, -2, 3, -4]).buffer, 'int32');
  assert.deepEqual(i.toList(), [1, -2, 3, -4]);
  assert.throws(() => hpu.frombuffer(Buffer.alloc(10), 'float32', [3]), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});

test('views', () => {
  const t = hpu.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]);
  const tt = t.transpose(0, 1);
  assert.deepEqual([tt.shape, tt.strides, tt.isContiguous()], [[4, 3], [1, 4], false]);
  assert.deepEqual(tt.toList()[1], [1, 5, 9]);
  assert.deepEqual(t.slice(1, 0, 4, 2).toList(), [[0, 2], [4, 6], [8, 10]]);
  assert.deepEqual(t.reshape([2, -1]).shape, [2, 6]);
  assert.deepEqual(tt.reshape([-1]).toList().slice(0, 4), [0, 4, 8, 1]);
  assert.throws(() => t.reshape([5, -1]), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => t.transpose(0, 2), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => t.slice(0, 2, 1), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  t.slice(0, 1, 2).fill(0.5);
  assert.deepEqual(t.toList()[1], [0.5, 0.5, 0.5, 0.5]);
});

test('fills, conversions, copies', () => {
  assert.deepEqual(hpu.full([2, 2], 7, { dtype: 'int32' }).toList(), [[7, 7], [7, 7]]);
  assert.deepEqual(hpu.ones([3]).toList(), [1, 1, 1]);
  const t = hpu.tensor([1.7, -2.7, 300]);
  assert.deepEqual(t.to('int32').toList(), [1, -2, 300]);
  assert.deepEqual(t.to('uint8').toList(), [1, 0, 255]);
  const moved = t.to({ device: 2 });
  assert.equal(moved.device.index, 2);
  assert.equal(t.to('float32'), t);
  const dst = hpu.empty([3], { dtype: 'float64', device: 3 }).copyFrom(t);
  assert.deepEqual(Array.from(dst.data()), Array.from(t.data()));
  assert.throws(() => dst.copyFrom(hpu.zeros([2])), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});

test('a copy across devices waits for the work queued on the source device', () => {
  for (let i = 0; i < 5; i++) {
    const a = hpu.full([512, 512], 1, { device: 2 });
    const moved = hpu.matmul(a, a).to({ device: 3 }); // the product is still running on device 2
    assert.equal(moved.sum().item(), 512 ** 3);
  }
});

test('later work on the source device waits for a copy across devices', () => {
  for (let i = 0; i < 5; i++) {
    const busy = hpu.full([512, 512], 1, { device: 3 });
    hpu.matmul(busy, busy); // the copy queues behind this on device 3
    const src = hpu.full([512, 512], 2, { device: 2 });
    const dst = hpu.empty([512, 512], { device: 3 }).copyFrom(src);
    src.fill(0);
    assert.equal(dst.sum().item(), 2 * 512 * 512);
  }
  hpu.synchronize(2); // leaves no queued work to defer other tests' frees
});

test('memory is counted and released', () => {
  const before = hpu.memoryAllocated(5);
  const t = hpu.empty([1000], { device: 5 });
  assert.equal(hpu.memoryAllocated(5) - before, 4096);
  assert.equal(t.nbytes, 4000);
  t.release();
  t.release();
  // A free waits for work queued anywhere in the process (hpuMemFree(3)).
  for (let i = 0; i < hpu.deviceCount(); i++) hpu.synchronize(i);
  assert.equal(hpu.memoryAllocated(5), before);
});

test('random generator', () => {
  hpu.manualSeed(42, 4);
  const a = hpu.rand([1000], { device: 4 }).data();
  const state = hpu.getRngState(4);
  assert.deepEqual(state, { seed: 42, offset: 1000 });
  const b = hpu.randn([1000], { device: 4 }).data();
  hpu.setRngState({ seed: 42, offset: 0 }, 4);
  assert.deepEqual(hpu.rand([1000], { device: 4 }).data(), a);
  hpu.setRngState(state, 4);
  assert.deepEqual(hpu.randn([1000], { device: 4 }).data(), b);
  assert.ok(a.every((x) => x >= 0 && x < 1));
});

test('checks', () => {
  assert.throws(() => hpu.empty([-1]), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.empty(new Array(9).fill(1)), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.empty([2], { dtype: 'complex64' }), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.tensor([1, 2]).item(), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.zeros([3], { dtype: 'int32' }).uniform(), isHpuError('HPU_ERROR_UNSUPPORTED'));
  assert.throws(() => hpu.zeros([3], { device: 99 }), isHpuError('HPU_ERROR_NOT_FOUND'));
});

test('withStream queues tensor work on a chosen stream', () => {
  const s = new hpu.Stream(1);
  hpu.withStream(s, () => {
    const t = hpu.zeros([1 << 16], { device: 1 });
    t.fill(2);
    assert.deepEqual(Array.from(t.slice(0, 0, 3).data()), [2, 2, 2]);
  });
  s.synchronize();
  s.close();
});
