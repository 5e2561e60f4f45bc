'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');

test('queued work runs in order', () => {
  const s = new hpu.Stream(1);
  assert.ok(s.device.equals(new hpu.Device(1)));
  const a = hpu.memAlloc(1 << 20, 1);
  const b = hpu.memAlloc(1 << 20, 1);
  for (const v of [1, 2, 3]) {
    a.fill(v, { stream: s });
    b.copyFrom(a, { stream: s });
  }
  s.synchronize();
  assert.equal(s.query(), true);
  assert.deepEqual(b.copyToHost(), Buffer.alloc(1 << 20, 3));
  a.free();
  b.free();
  s.close();
});

test('waitEvent orders two streams', () => {
  const producer = new hpu.Stream();
  const consumer = new hpu.Stream();
  const a = hpu.memAlloc(4 << 20);
  const b = hpu.memAlloc(4 << 20);
  a.fill(0);
  a.fill(9, { stream: producer });
  consumer.waitEvent(producer.recordEvent());
  b.copyFrom(a, { stream: consumer });
  consumer.synchronize();
  assert.deepEqual(b.copyToHost(), Buffer.alloc(4 << 20, 9));
  a.fill(5, { stream: producer });
  consumer.waitStream(producer);
  b.copyFrom(a, { stream: consumer });
  consumer.synchronize();
  assert.deepEqual(b.copyToHost(Buffer.alloc(8)), Buffer.alloc(8, 5));
  a.free();
  b.free();
  producer.close();
  consumer.close();
});

test('default stream', () => {
  const d = hpu.defaultStream(2);
  assert.ok(d.equals(hpu.defaultStream('hpu:2')));
  d.close(); // never destroys a default stream
  d.synchronize();
  hpu.withDevice(2, () => assert.ok(hpu.defaultStream().equals(d)));
});

test('events time work', () => {
  const s = new hpu.Stream();
  const start = new hpu.Event();
  const end = new hpu.Event();
  const mem = hpu.memAlloc(16 << 20);
  start.record(s);
  for (let i = 0; i < 4; i++) mem.fill(1, { stream: s });
  end.record(s);
  end.synchronize();
  assert.equal(end.query(), true);
  assert.ok(start.elapsedTime(end) >= 0);
  mem.free();
  s.close();
});

test('an unrecorded event in elapsedTime', () => {
  const a = new hpu.Event();
  const b = new hpu.Event();
  a.record();
  a.synchronize();
  assert.throws(() => a.elapsedTime(b), (e) => e instanceof hpu.HpuError && e.message.includes('hpuEventElapsedTime'));
});
