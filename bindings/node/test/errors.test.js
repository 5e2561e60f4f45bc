'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');
const native = require('../lib/native');
const { runNode } = require('./support');

test('status names match the library', () => {
  for (const [key, value] of Object.entries(hpu.Status)) {
    const expected = value === 0 ? 'HPU_SUCCESS' : `HPU_ERROR_${key}`;
    assert.equal(native.getErrorName(value), expected);
  }
  for (let n = 0; n < 256; n++) {
    const name = native.getErrorName(n);
    if (name !== 'HPU_STATUS_UNKNOWN') assert.ok(Object.values(hpu.Status).includes(n), name);
  }
});

test('HpuError carries status, code and message', () => {
  const e = new hpu.HpuError(hpu.Status.TIMEOUT, 'detail');
  assert.ok(e instanceof Error);
  assert.equal(e.name, 'HpuError');
  assert.equal(e.status, 13);
  assert.equal(e.code, 'HPU_ERROR_TIMEOUT');
  assert.equal(e.statusName, 'HPU_ERROR_TIMEOUT');
  assert.equal(e.message, 'detail');
  assert.equal(new hpu.HpuError(1234, 'x').code, 'HPU_STATUS_UNKNOWN');
});

function assertHpuError(fn, code, ...fragments) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof hpu.HpuError, `not an HpuError: ${e}`);
    assert.equal(e.code, code);
    for (const f of fragments) assert.ok(e.message.includes(f), `'${e.message}' lacks '${f}'`);
    return true;
  });
}

test('no such device', () => {
  const n = hpu.deviceCount();
  assertHpuError(() => new hpu.Device(n), 'HPU_ERROR_NOT_FOUND', 'hpuDeviceOpen', `ordinal ${n}`);
  assertHpuError(() => new hpu.Device(-1), 'HPU_ERROR_NOT_FOUND');
});

test('the message is the last error message', () => {
  try {
    new hpu.Device(1000);
    assert.fail('no error');
  } catch (e) {
    assert.equal(e.message, native.getLastErrorMessage());
  }
});

test('invalid argument from the library', () => {
  const mem = hpu.memAlloc(4096);
  assertHpuError(() => mem.fill(300), 'HPU_ERROR_INVALID_ARGUMENT', 'hpuMemset', '300');
  mem.free();
});

test('out of memory leaves the statistics alone', () => {
  const before = hpu.memoryStats(0);
  assertHpuError(() => hpu.memAlloc(before.Limit + 1, 0), 'HPU_ERROR_OUT_OF_MEMORY', 'hpuMemAlloc');
  const after = hpu.memoryStats(0);
  assert.equal(after.InUse, before.InUse);
  assert.equal(after.NumAllocs, before.NumAllocs);
});

test('closed handles', () => {
  const s = new hpu.Stream();
  s.close();
  s.close();
  assertHpuError(() => s.synchronize(), 'HPU_ERROR_INVALID_HANDLE', 'hpuStreamSynchronize');
  const e = new hpu.Event();
  e.close();
  assertHpuError(() => e.record(), 'HPU_ERROR_INVALID_HANDLE', 'hpuEventRecord');
});

test('a raw call with NULL', () => {
  assertHpuError(() => native.C.hpuDeviceCount(null), 'HPU_ERROR_INVALID_ARGUMENT', 'count is NULL');
});

test('a configuration error names the variable', () => {
  const r = runNode(`const hpu = require('.');
    try { hpu.deviceCount(); } catch (e) { console.log(e.code, '|', e.message); }`, { HPU_NUM_DEVICES: 'banana' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^HPU_ERROR_CONFIG \| .*HPU_NUM_DEVICES.*banana/);
});

test('checks made before the call', () => {
  assert.throws(() => hpu.memoryStats(1.5), TypeError);
  assertHpuError(() => hpu.memoryStats('cuda:0'), 'HPU_ERROR_INVALID_ARGUMENT', "'cuda:0'");
  const mem = hpu.memAlloc(100);
  assertHpuError(() => mem.copyFromHost(Buffer.alloc(101)), 'HPU_ERROR_INVALID_ARGUMENT', '101 bytes at offset 0');
  assertHpuError(() => mem.copyToHost(Buffer.alloc(10), 95), 'HPU_ERROR_INVALID_ARGUMENT');
  assert.throws(() => mem.copyFromHost([1, 2, 3]), TypeError);
  mem.free();
  mem.free();
  assertHpuError(() => mem.copyFromHost(Buffer.alloc(1)), 'HPU_ERROR_INVALID_HANDLE', 'freed');
  assertHpuError(() => hpu.memAlloc(-1), 'HPU_ERROR_INVALID_ARGUMENT', 'nbytes -1');
});

test('a library that does not load', () => {
  const r = runNode("require('.')", { HPU_LIBRARY: '/nonexistent/libhpu.so.0' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /hpu: cannot load HPU_LIBRARY=\/nonexistent\/libhpu\.so\.0/);
});
