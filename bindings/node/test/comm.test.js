'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');

const N = 4;
const isHpuError = (code) => (e) => e instanceof hpu.HpuError && e.code === code;
const perRank = (make) => Array.from({ length: N }, (_, r) => make(r));

test('collectives over a group in this process', async (t) => {
  const comms = hpu.Comm.initAll([0, 1, 2, 3]);
  const sync = () => comms.forEach((c) => c.synchronize());
  t.after(() => comms.forEach((c) => c.destroy()));

  await t.test('ranks', () => {
    assert.deepEqual(comms.map((c) => [c.rank, c.worldSize, c.device.index]), perRank((r) => [r, N, r]));
  });

  await t.test('allReduce with every op', () => {
    const values = [[1.5, -2, 3], [0.5, 4, -1], [2, 2, 2], [-1, 0.25, 8]];
    const col = (i) => values.map((v) => v[i]);
    const expected = {
      sum: [0, 1, 2].map((i) => col(i).reduce((a, b) => a + b)),
      product: [0, 1, 2].map((i) => col(i).reduce((a, b) => a * b)),
      min: [0, 1, 2].map((i) => Math.min(...col(i))),
      max: [0, 1, 2].map((i) => Math.max(...col(i))),
      avg: [0, 1, 2].map((i) => col(i).reduce((a, b) => a + b) / N),
    };
    for (const [op, want] of Object.entries(expected)) {
      const ts = perRank((r) => hpu.tensor(values[r], { device: r }));
      comms.forEach((c, r) => assert.equal(c.allReduce(ts[r], op), ts[r]));
      sync();
      for (const x of ts) assert.deepEqual(x.toList(), want, op);
    }
    const ints = perRank((r) => hpu.tensor([r, 100 * r], { dtype: 'int32', device: r }));
    comms.forEach((c, r) => c.allReduce(ints[r], hpu.ReduceOp.SUM));
    sync();
    assert.deepEqual(ints[3].toList(), [6, 600]);
  });

  await t.test('broadcast and reduce', () => {
    const ts = perRank((r) => hpu.tensor([r, r], { device: r }));
    comms.forEach((c, r) => c.broadcast(ts[r], 2));
    sync();
    assert.deepEqual(ts.map((x) => x.toList()), perRank(() => [2, 2]));
    const rs = perRank((r) => hpu.tensor([r + 1], { device: r }));
    comms.forEach((c, r) => c.reduce(rs[r], 1, 'max'));
    sync();
    assert.deepEqual([rs[1].item(), rs[0].item()], [4, 1]);
  });

  await t.test('gathers, scatters, all-to-all', () => {
    const ins = perRank((r) => hpu.tensor([r, 10 * r], { dtype: 'int32', device: r }));
    const outs = perRank((r) => hpu.empty([2 * N], { dtype: 'int32', device: r }));
    const lists = perRank((r) => perRank(() => hpu.empty([2], { dtype: 'int32', device: r })));
    comms.forEach((c, r) => {
      c.allGatherIntoTensor(outs[r], ins[r]);
      c.allGather(lists[r], ins[r]);
    });
    sync();
    assert.deepEqual(outs[2].toList(), perRank((r) => [r, 10 * r]).flat());
    assert.deepEqual(lists[0].map((x) => x.toList()), perRank((r) => [r, 10 * r]));
    const big = perRank((r) => hpu.tensor(Array.from({ length: 2 * N }, (_, i) => r * 100 + i), { device: r }));
    const part = perRank((r) => hpu.empty([2], { device: r }));
    comms.forEach((c, r) => c.reduceScatterTensor(part[r], big[r]));
    sync();
    for (let r = 0; r < N; r++) {
      assert.deepEqual(part[r].toList(), [0, 1].map((k) => perRank((q) => q * 100 + 2 * r + k).reduce((a, b) => a + b)));
    }
    const a2a = perRank((r) => hpu.tensor(perRank((q) => r * 10 + q), { dtype: 'int32', device: r }));
    const got = perRank((r) => hpu.empty([N], { dtype: 'int32', device: r }));
    comms.forEach((c, r) => c.allToAllSingle(got[r], a2a[r]));
    sync();
    assert.deepEqual(got[1].toList(), perRank((q) => q * 10 + 1));
  });

  await t.test('send and recv in a group; barrier; timeout', () => {
    const a = hpu.tensor([1, 2], { device: 0 });
    const b = hpu.tensor([3, 4], { device: 1 });
    const ra = hpu.empty([2], { device: 0 });
    const rb = hpu.empty([2], { device: 1 });
    hpu.group(() => {
      comms[0].send(a, 1);
      comms[0].recv(ra, 1);
      comms[1].send(b, 0);
      comms[1].recv(rb, 0);
    });
    sync();
    assert.deepEqual([ra.toList(), rb.toList()], [[3, 4], [1, 2]]);
    comms.forEach((c) => c.barrier());
    sync();
    const saved = comms[0].timeout;
    comms[0].timeout = 5.5;
    assert.equal(comms[0].timeout, 5.5);
    comms[0].timeout = 0;
    assert.equal(comms[0].timeout, saved);
  });

  await t.test('checks', () => {
    const c = comms[0];
    assert.throws(() => c.allReduce(hpu.zeros([3], { device: 1 })), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
    assert.throws(() => c.allReduce([1]), TypeError);
    assert.throws(() => c.allReduce(hpu.zeros([3, 4]).transpose(0, 1)), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
    assert.throws(() => c.allReduce(hpu.zeros([3]), 'xor'), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
    assert.throws(() => c.allGatherIntoTensor(hpu.empty([5]), hpu.empty([2])),
      (e) => isHpuError('HPU_ERROR_INVALID_ARGUMENT')(e) && /output has 5 elements; 8 are needed/.test(e.message));
    assert.throws(() => c.broadcast(hpu.zeros([2]), N), (e) => e instanceof hpu.HpuError && /hpuBroadcast/.test(e.message));
  });
});

test('initRank joins ranks off the main thread', async () => {
  const uid = hpu.getUniqueId();
  assert.equal(uid.length, 128);
  assert.notDeepEqual(uid, hpu.getUniqueId());
  const comms = await Promise.all([0, 1, 2].map((r) => hpu.Comm.initRank(4 + r, 3, uid, r)));
  const ts = comms.map((c, r) => hpu.tensor(new Array(8).fill(r), { device: 4 + r }));
  comms.forEach((c, r) => c.allReduce(ts[r]));
  comms.forEach((c) => c.synchronize());
  assert.deepEqual(comms.map((c) => c.rank), [0, 1, 2]);
  assert.deepEqual(ts.map((x) => x.toList()), [0, 1, 2].map(() => new Array(8).fill(3)));
  comms.forEach((c) => c.destroy());
  await assert.rejects(hpu.Comm.initRank(0, 2, Buffer.alloc(3), 0), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  await assert.rejects(hpu.Comm.initRank(0, 2, hpu.getUniqueId(), 5), (e) => e instanceof hpu.HpuError);
});

test('abort', () => {
  const comms = hpu.Comm.initAll([6, 7]);
  comms[0].abort();
  assert.equal(comms[0].getAsyncError().code, 'HPU_ERROR_ABORTED');
  assert.throws(() => comms[0].allReduce(hpu.zeros([2], { device: 6 })), isHpuError('HPU_ERROR_ABORTED'));
  comms.forEach((c) => { c.abort(); c.destroy(); });
  assert.throws(() => hpu.Comm.initAll([0, 0]), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});
