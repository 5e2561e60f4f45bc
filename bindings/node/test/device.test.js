'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');
const { runNode } = require('./support');

test('eight devices by default', () => {
  const r = runNode("const hpu = require('.'); console.log(hpu.deviceCount(), hpu.isAvailable())",
    { HPU_NUM_DEVICES: '', HPU_VISIBLE_DEVICES: '', HPU_CONFIG: '' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '8 true');
});

test('count and visibility from the environment', () => {
  const r = runNode(`const hpu = require('.');
    const ids = []; for (let i = 0; i < hpu.deviceCount(); i++) ids.push(hpu.getDeviceProperties(i).moduleId);
    console.log(hpu.deviceCount(), ids.join(','))`, { HPU_NUM_DEVICES: '4', HPU_VISIBLE_DEVICES: '3,1' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '2 3,1');
});

test('properties', () => {
  const p = hpu.getDeviceProperties(1);
  assert.deepEqual(p, {
    name: 'HPU 1 (gaudi2, emulated)', profile: 'gaudi2', totalMemory: 96 * 2 ** 30,
    memoryLimit: hpu.memoryStats(1).Limit, ordinal: 1, moduleId: 1, kernelIsa: p.kernelIsa,
  });
  assert.ok(['amx', 'avx512', 'avx2', 'scalar'].includes(p.kernelIsa), p.kernelIsa);
  assert.equal(hpu.getDeviceName(1), p.name);
  assert.deepEqual(new hpu.Device(1).properties, p);
});

test('kernelIsa follows HPU_KERNEL_ISA', () => {
  const r = runNode(`const hpu = require('.'); console.log(hpu.getDeviceProperties(0).kernelIsa)`,
    { HPU_KERNEL_ISA: 'scalar' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'scalar');
});

test('profile and memory fraction', () => {
  const r = runNode(`const hpu = require('.'); const p = hpu.getDeviceProperties(0);
    console.log(p.profile, p.totalMemory, p.memoryLimit, JSON.stringify(hpu.memGetInfo(0)))`,
  { HPU_DEVICE_PROFILE: 'gaudi3', HPU_MEMORY_FRACTION: '0.5' });
  assert.equal(r.status, 0, r.stderr);
  const total = 128 * 2 ** 30;
  assert.equal(r.stdout.trim(), `gaudi3 ${total} ${total / 2} {"free":${total / 2},"total":${total / 2}}`);
});

test('device arguments agree', () => {
  for (const arg of [1, 'hpu:1', new hpu.Device(1)]) assert.equal(new hpu.Device(arg).index, 1);
  assert.equal(String(new hpu.Device(1)), 'hpu:1');
  assert.ok(new hpu.Device(1).equals(new hpu.Device('hpu:1')));
  assert.equal(new hpu.Device(0).handle, new hpu.Device('hpu:0').handle);
  assert.notEqual(new hpu.Device(0).handle, new hpu.Device(1).handle);
});

test('withDevice sets the current device, nests and restores', () => {
  assert.equal(hpu.currentDevice(), 0);
  const result = hpu.withDevice(2, (d) => {
    assert.equal(d.index, 2);
    assert.equal(hpu.currentDevice(), 2);
    assert.equal(new hpu.Device().index, 2);
    assert.equal(new hpu.Device('hpu').index, 2);
    hpu.withDevice('hpu:3', () => assert.equal(hpu.currentDevice(), 3));
    assert.equal(hpu.currentDevice(), 2);
    return 'done';
  });
  assert.equal(result, 'done');
  assert.equal(hpu.currentDevice(), 0);
  assert.throws(() => hpu.withDevice(1, () => { throw new RangeError('x'); }), RangeError);
  assert.equal(hpu.currentDevice(), 0);
});

test('withDevice follows async continuations only', async () => {
  let release;
  const gate = new Promise((r) => { release = r; });
  const inner = hpu.withDevice(3, async () => {
    await gate;
    return hpu.currentDevice();
  });
  assert.equal(hpu.currentDevice(), 0); // not leaked to the caller while the callback waits
  release();
  assert.equal(await inner, 3);
});

test('setDevice', () => {
  try {
    hpu.setDevice('hpu:2');
    assert.equal(hpu.currentDevice(), 2);
    assert.throws(() => hpu.setDevice(99), (e) => e.code === 'HPU_ERROR_NOT_FOUND');
    assert.equal(hpu.currentDevice(), 2);
  } finally {
    hpu.setDevice(0);
  }
});

test('synchronize and the library version', () => {
  hpu.synchronize();
  hpu.synchronize(3);
  new hpu.Device(2).synchronize();
  assert.equal(hpu.libraryVersion(), hpu.version);
});
