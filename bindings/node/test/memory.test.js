'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');

const G = 512; // HPU_MEM_GRANULARITY
const rounded = (n) => Math.ceil(n / G) * G;
const DEV = 3; // no other test in this file allocates on it

test.beforeEach(() => {
  hpu.emptyCache(DEV);
  hpu.resetAccumulatedMemoryStats(DEV);
  hpu.resetPeakMemoryStats(DEV);
});

test('keys in Habana order', () => {
  assert.deepEqual(Object.keys(hpu.memoryStats(DEV)), [
    'Limit', 'InUse', 'MaxInUse', 'NumAllocs', 'NumFrees', 'ActiveAllocs', 'MaxAllocSize',
    'TotalSystemAllocs', 'TotalSystemFrees', 'TotalActiveAllocs', 'ReservedBytes', 'SegmentAllocs', 'SegmentFrees']);
  assert.deepEqual(Object.keys(hpu.memoryStats(DEV)), [...hpu.HABANA_STATS_KEYS, ...hpu.ALLOCATOR_STATS_KEYS]);
});

test('counting', () => {
  const s0 = hpu.memoryStats(DEV);
  const a = hpu.memAlloc(1000, DEV);
  const b = hpu.memAlloc(3 * G, DEV);
  const s1 = hpu.memoryStats(DEV);
  assert.equal(s1.InUse - s0.InUse, rounded(1000) + 3 * G);
  assert.equal(s1.NumAllocs, s0.NumAllocs + 2);
  assert.equal(s1.ActiveAllocs, s1.NumAllocs - s1.NumFrees);
  assert.equal(s1.MaxAllocSize, 3 * G);
  assert.equal(s1.MaxInUse, s1.InUse);
  assert.equal(s1.TotalSystemAllocs, s0.TotalSystemAllocs + 2);
  assert.equal(hpu.memoryAllocated(DEV), s1.InUse);
  assert.equal(hpu.maxMemoryAllocated(DEV), s1.MaxInUse);
  assert.deepEqual(hpu.memGetInfo(DEV), { free: s1.Limit - s1.InUse, total: s1.Limit });
  a.free();
  const s2 = hpu.memoryStats(DEV);
  assert.equal(s2.InUse, s1.InUse - rounded(1000));
  assert.equal(s2.NumFrees, s1.NumFrees + 1);
  assert.equal(s2.MaxInUse, s1.MaxInUse);
  assert.equal(s2.TotalActiveAllocs, s2.TotalSystemAllocs - s2.TotalSystemFrees);
  b.free();
});

test('reset peak sets MaxInUse to zero', () => {
  const m = hpu.memAlloc(4 * G, DEV);
  hpu.resetPeakMemoryStats(DEV);
  assert.equal(hpu.maxMemoryAllocated(DEV), 0);
  assert.ok(hpu.memoryAllocated(DEV) > 0);
  const n = hpu.memAlloc(G, DEV);
  assert.equal(hpu.maxMemoryAllocated(DEV), hpu.memoryAllocated(DEV));
  n.free();
  m.free();
});

test('reset accumulated; ActiveAllocs goes negative', () => {
  const old = hpu.memAlloc(8 * G, DEV);
  hpu.memAlloc(G, DEV).free();
  hpu.resetAccumulatedMemoryStats(DEV);
  let s = hpu.memoryStats(DEV);
  assert.deepEqual([s.NumAllocs, s.NumFrees, s.MaxAllocSize], [0, 0, 0]);
  assert.equal(s.MaxInUse, s.InUse);
  old.free();
  s = hpu.memoryStats(DEV);
  assert.equal(s.NumFrees, 1);
  assert.equal(s.ActiveAllocs, -1);
});

test('emptyCache returns segments', () => {
  hpu.memAlloc(1 << 20, DEV).free();
  const before = hpu.memoryStats(DEV);
  assert.ok(before.ReservedBytes > 0);
  hpu.emptyCache(DEV);
  const after = hpu.memoryStats(DEV);
  assert.ok(after.ReservedBytes < before.ReservedBytes);
  assert.ok(after.SegmentFrees > before.SegmentFrees);
});

test('the current device is the default', () => {
  hpu.withDevice(DEV, () => {
    assert.deepEqual(hpu.memoryStats(), hpu.memoryStats(DEV));
    const m = hpu.memAlloc(G);
    assert.equal(m.device.index, DEV);
    m.free();
  });
});

test('round trip of host data types', () => {
  const payload = Buffer.alloc(10240);
  for (let i = 0; i < payload.length; i++) payload[i] = i % 251;
  const copy = (x) => Uint8Array.from(payload).buffer;
  for (const src of [payload, new Uint8Array(copy()), copy(), new DataView(copy()), new Uint16Array(copy())]) {
    const mem = hpu.memAlloc(payload.length);
    mem.copyFromHost(src);
    assert.deepEqual(mem.copyToHost(), payload, src.constructor.name);
    mem.free();
  }
});

test('typed arrays, offsets and views', () => {
  const values = new Float64Array([1.5, -2.25, 1e300]);
  const mem = hpu.memAlloc(64);
  mem.fill(0xab);
  mem.copyFromHost(values, 8);
  const back = new Float64Array(3);
  assert.equal(mem.copyToHost(back, 8), back);
  assert.deepEqual(back, values);
  const bytes = Buffer.from('0123456789');
  mem.copyFromHost(bytes.subarray(2, 6), 40); // a view with a byteOffset
  assert.equal(mem.copyToHost(Buffer.alloc(8), 38).toString('latin1'), '\xab\xab2345\xab\xab');
  assert.deepEqual(mem.copyToHost(undefined, 60), Buffer.from([0xab, 0xab, 0xab, 0xab]));
  mem.free();
});

test('device to device across devices', () => {
  const data = Buffer.from(Array.from({ length: 200 }, (_, i) => i));
  const a = hpu.memAlloc(200, 0);
  const b = hpu.memAlloc(300, 1);
  a.copyFromHost(data);
  b.fill(7);
  b.copyFrom(a, { offset: 100 });
  assert.deepEqual(b.copyToHost(), Buffer.concat([Buffer.alloc(100, 7), data]));
  b.copyFrom(a, { nbytes: 50, srcOffset: 150 });
  assert.deepEqual(b.copyToHost(Buffer.alloc(50)), data.subarray(150));
  a.free();
  b.free();
});

test('row gather from the host', () => {
  const table = Buffer.from(Array.from({ length: 40 }, (_, i) => i)); // 10 rows of 4 bytes
  const mem = hpu.memAlloc(20);
  mem.fill(0xab);
  mem.copyRowsFromHost(table, 4, [9, 0, 9, 3]);
  assert.deepEqual(mem.copyToHost(), Buffer.concat([table.subarray(36), table.subarray(0, 4), table.subarray(36),
    table.subarray(12, 16), Buffer.alloc(4, 0xab)]));
  mem.copyRowsFromHost(new Int32Array([5, 6, 7]), 4, [2], 16);
  assert.deepEqual(mem.copyToHost(new Int32Array(1), 16), new Int32Array([7]));
  mem.copyRowsFromHost(table, 4, []);
  assert.throws(() => mem.copyRowsFromHost(table, 4, [1, 10]), /rows\[1\] is 10; data holds 10 rows of 4 bytes/);
  assert.throws(() => mem.copyRowsFromHost(table, 4, [0, 0, 0, 0, 0, 0]), /24 bytes at offset 0 do not fit in 20/);
  assert.throws(() => mem.copyRowsFromHost(table, -4, [0]), /rowBytes -4 is not a non-negative integer/);
  mem.free();
});

test('zero bytes', () => {
  const m = hpu.memAlloc(0);
  assert.equal(m.ptr, 0n);
  m.copyFromHost(Buffer.alloc(0));
  assert.equal(m.copyToHost().length, 0);
  m.fill(1);
  m.free();
});
