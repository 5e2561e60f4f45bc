'use strict';
// Tensor.hostView(): a TypedArray over a tensor's memory, without a copy.
const test = require('node:test');
const assert = require('node:assert/strict');
const { MessageChannel, receiveMessageOnPort } = require('node:worker_threads');
const v8 = require('node:v8');
const vm = require('node:vm');
const { constants: { MAX_LENGTH } } = require('node:buffer');
const hpu = require('..');
const { runNode } = require('./support');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const isHpuError = (code, message) => (e) => {
  assert.ok(e instanceof hpu.HpuError, String(e));
  assert.equal(e.code, code);
  if (message !== undefined) assert.equal(e.message, message);
  return true;
};

/** Collects garbage until cond() holds; false when it still does not after a few seconds. */
async function collectUntil(cond) {
  const deadline = Date.now() + 10000;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    gc();
    await new Promise((resolve) => setImmediate(resolve)); // FinalizationRegistry callbacks run here
  }
  return true;
}

const ARRAYS = {
  bool: Uint8Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, float16: Uint16Array, bfloat16: Uint16Array,
  float32: Float32Array, float64: Float64Array,
};

test('every dtype: the view shares memory both ways', () => {
  assert.deepEqual(Object.keys(ARRAYS).sort(), [...hpu.DTYPES].sort());
  for (const [dtype, HostArray] of Object.entries(ARRAYS)) {
    const t = hpu.tensor([[0, 1, 0], [1, 1, 0]], { dtype });
    const v = t.hostView();
    assert.equal(v.constructor, HostArray, dtype);
    assert.equal(v.byteLength, t.nbytes);
    assert.deepEqual(Buffer.from(v.buffer, v.byteOffset, v.byteLength), t.bytes(), dtype);
    // Write through the view, read through libhpu (a copy to the host).
    const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    bytes.set(hpu.tensor([1, 0, 1, 1, 0, 1], { dtype }).bytes());
    assert.deepEqual(t.toList(), hpu.tensor([[1, 0, 1], [1, 0, 1]], { dtype }).toList(), dtype);
    // An op writes (queued), the next hostView() shows it.
    t.copyFrom(hpu.zeros([2, 3]));
    assert.deepEqual(Buffer.from(t.hostView().buffer), hpu.zeros([2, 3], { dtype }).bytes(), dtype);
    assert.deepEqual(Buffer.from(v.buffer), hpu.zeros([2, 3], { dtype }).bytes(), dtype);
  }
  const half = hpu.tensor([1.5, -2], { dtype: 'bfloat16' }).hostView();
  assert.deepEqual(Array.from(half), [0x3fc0, 0xc000]); // bfloat16 bits
});

test('the README example', () => {
  const t = hpu.zeros([2, 3]);
  const v = t.hostView();
  v.set([1, -2, 3, -4, 5, -6]);
  assert.deepEqual(t.toList(), [[1, -2, 3], [-4, 5, -6]]);
  t.copyFrom(hpu.relu(t));
  hpu.synchronize();
  assert.deepEqual(Array.from(v), [1, 0, 3, 0, 5, 0]);
});

test('ops read what was written through the view', () => {
  const x = hpu.zeros([4]);
  x.hostView().set([-1, 2, -3, 4]);
  assert.deepEqual(Array.from(hpu.relu(x).data()), [0, 2, 0, 4]);
  const y = hpu.tensor(BigInt64Array.from([0n, 0n]));
  y.hostView()[1] = -7n;
  assert.deepEqual(y.data(), BigInt64Array.from([0n, -7n]));
});

test('hostView() waits for work queued on any stream of the device', () => {
  const s = new hpu.Stream(1);
  const t = hpu.zeros([1 << 20], { device: 1 });
  hpu.synchronize(1);
  hpu.withStream(s, () => {
    for (let i = 1; i <= 8; i++) t.fill(i);
  });
  const v = t.hostView();
  assert.ok(v.every((x) => x === 8), `elements other than 8: ${v.filter((x) => x !== 8).length}`);
  s.close();
});

test('hostView() waits for work on other devices that reads the tensor', () => {
  const n = 1 << 21;
  const src = hpu.full([n], 3, { device: 2 });
  const dsts = [];
  for (let i = 0; i < 4; i++) dsts.push(src.to({ device: 3 })); // copies queued on device 3's stream
  src.hostView().fill(-1);
  for (const dst of dsts) {
    const got = dst.data();
    assert.ok(got.every((x) => x === 3), `elements other than 3: ${got.filter((x) => x !== 3).length}`);
  }
});

test('a contiguous view of a tensor gives its own elements', () => {
  const base = hpu.tensor(Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), { shape: [4, 2] });
  const rows = base.slice(0, 1, 3);
  assert.ok(rows.isContiguous());
  const v = rows.hostView();
  assert.deepEqual(Array.from(v), [2, 3, 4, 5]);
  v[0] = 20;
  assert.deepEqual(Array.from(base.data()), [0, 1, 20, 3, 4, 5, 6, 7]);
  assert.deepEqual(Array.from(base.reshape([8]).hostView()), [0, 1, 20, 3, 4, 5, 6, 7]);
});

test('the view outlives release(); its memory returns when it is collected', async () => {
  const dev = 6;
  hpu.synchronize(dev);
  const before = hpu.memoryAllocated(dev);
  let v = (() => {
    const t = hpu.tensor(Float32Array.from([1, 2, 3, 4]), { device: dev });
    const view = t.hostView();
    t.release();
    return view;
  })();
  hpu.synchronize(dev);
  assert.equal(hpu.memoryAllocated(dev) - before, 512, 'the view keeps the memory allocated');
  // Had the memory gone back, this tensor of the same size would take it.
  const other = hpu.full([4], 9, { device: dev });
  hpu.synchronize(dev);
  assert.deepEqual(Array.from(v), [1, 2, 3, 4]);
  v[3] = 40;
  assert.deepEqual(Array.from(other.data()), [9, 9, 9, 9]);
  other.release();
  v = null;
  assert.ok(await collectUntil(() => hpu.memoryAllocated(dev) === before),
    `memoryAllocated(${dev}) is ${hpu.memoryAllocated(dev)}, was ${before} before the view`);
});

test('an array over the view\'s buffer keeps the memory too', async () => {
  const dev = 7;
  hpu.synchronize(dev);
  const before = hpu.memoryAllocated(dev);
  let bytes = (() => {
    const t = hpu.tensor(Int32Array.from([1, 2]), { device: dev });
    const view = t.hostView();
    t.release();
    return new Uint8Array(view.buffer);
  })();
  gc();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(hpu.memoryAllocated(dev) - before, 512);
  assert.deepEqual(Array.from(new Int32Array(bytes.buffer)), [1, 2]);
  bytes = null;
  assert.ok(await collectUntil(() => hpu.memoryAllocated(dev) === before));
});

test('the buffer cannot be moved: a transfer copies it', () => {
  const t = hpu.tensor([1, 2, 3]);
  const v = t.hostView();
  const cloned = structuredClone(v.buffer, { transfer: [v.buffer] });
  assert.equal(v.byteLength, 12, 'not detached');
  new Float32Array(cloned)[0] = 10;
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(v.buffer, [v.buffer]);
  const posted = receiveMessageOnPort(port2).message;
  port1.close();
  assert.equal(v.byteLength, 12, 'not detached');
  new Float32Array(posted)[1] = 20;
  assert.deepEqual(Array.from(v), [1, 2, 3]);
  assert.deepEqual(Array.from(t.data()), [1, 2, 3]);
});

test('bad input', () => {
  const t = hpu.tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), { shape: [2, 3] });
  assert.throws(() => t.transpose(0, 1).hostView(), isHpuError('HPU_ERROR_INVALID_ARGUMENT',
    'hostView: hpu.Tensor(shape=[3,2], dtype=float32, device=hpu:0) has strides [1, 3], not contiguous; ' +
    'take the hostView() of its contiguous() copy'));
  assert.deepEqual(Array.from(t.transpose(0, 1).contiguous().hostView()), [1, 4, 2, 5, 3, 6]);
  assert.throws(() => t.slice(1, 0, 3, 2).hostView(), isHpuError('HPU_ERROR_INVALID_ARGUMENT',
    'hostView: hpu.Tensor(shape=[2,2], dtype=float32, device=hpu:0) has strides [3, 2], not contiguous; ' +
    'take the hostView() of its contiguous() copy'));
  // Larger than any ArrayBuffer (the memory is reserved, not touched).
  const huge = hpu.empty([MAX_LENGTH + 1], { dtype: 'uint8' });
  assert.throws(() => huge.hostView(), isHpuError('HPU_ERROR_UNSUPPORTED',
    `hostView: hpu.Tensor(shape=[${MAX_LENGTH + 1}], dtype=uint8, device=hpu:0) has ${MAX_LENGTH + 1} bytes; ` +
    `an ArrayBuffer holds at most ${MAX_LENGTH} (buffer.constants.MAX_LENGTH): take the hostView() of slices along dim 0`));
  const most = huge.slice(0, 1).hostView();
  assert.equal(most.length, MAX_LENGTH);
  most[MAX_LENGTH - 1] = 7;
  assert.deepEqual(Array.from(huge.slice(0, MAX_LENGTH).data()), [7]);
  huge.release();
  const empty = hpu.empty([0, 3], { dtype: 'int32' }).hostView();
  assert.equal(empty.constructor, Int32Array);
  assert.equal(empty.length, 0);
  const v = t.hostView();
  t.release();
  assert.throws(() => t.hostView(), isHpuError('HPU_ERROR_INVALID_HANDLE',
    'hostView: hpu.Tensor(shape=[2,3], dtype=float32, device=hpu:0) was released'));
  // The released tensor's handle is dead even though the view keeps the memory.
  assert.throws(() => t.data(), isHpuError('HPU_ERROR_INVALID_HANDLE'));
  assert.deepEqual(Array.from(v), [1, 2, 3, 4, 5, 6]);
});

test('sticky errors: the tensor\'s device throws its own, not another device\'s', () => {
  const r = runNode(`
    const hpu = require('.');
    const t = hpu.tensor([1, 2], { device: 2 });
    const other = hpu.tensor([5, 6], { device: 0 });
    hpu.crossEntropy(hpu.tensor([[1, 2, 3]], { device: 2 }), hpu.tensor(BigInt64Array.from([5n]), { device: 2 }));
    console.log(JSON.stringify(Array.from(other.hostView())));
    try { t.hostView(); console.log('no error'); } catch (e) { console.log(e.code, e.message); }
  `);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '[5,6]\nHPU_ERROR_INVALID_ARGUMENT hpuDeviceSynchronize: hpuCrossEntropyLoss: ' +
    'target[0] is 5, not a class in 0..2 nor ignore_index -100\n');
});

test('a view keeps its device from closing', () => {
  // In a child: the binding keeps devices open, and this test closes one.
  const r = runNode(`
    require('node:v8').setFlagsFromString('--expose-gc');
    const gc = require('node:vm').runInNewContext('gc');
    const hpu = require('.');
    const { C } = require('./lib/native');
    const dev = new hpu.Device(0);
    let v = (() => { const t = hpu.tensor([1, 2]); const view = t.hostView(); t.release(); return view; })();
    try { C.hpuDeviceClose(dev.handle); console.log('closed'); } catch (e) { console.log(e.code, e.message); }
    console.log(JSON.stringify(Array.from(v)));
    v = null;
    (async () => {
      for (let i = 0; i < 1000 && hpu.memoryAllocated(0) !== 0; i++) {
        gc();
        await new Promise((resolve) => setImmediate(resolve));
      }
      C.hpuDeviceClose(dev.handle);
      console.log('closed');
    })();
  `);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'HPU_ERROR_BUSY hpuDeviceClose: device 0 still has 1 allocation (512 B) alive; free them first\n' +
    '[1,2]\nclosed\n');
});
