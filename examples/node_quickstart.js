#!/usr/bin/env node
// A tour of libhpu's Node.js binding: devices, memory statistics, streams, errors.
//
// Run: (cd bindings/node && npm ci) && HPU_LIBRARY=build/libhpu.so.0 node examples/node_quickstart.js
'use strict';
const hpu = require('../bindings/node');

console.log(`libhpu ${hpu.libraryVersion()}: ${hpu.deviceCount()} devices`);
for (let i = 0; i < Math.min(2, hpu.deviceCount()); i++) {
  const p = hpu.getDeviceProperties(i);
  console.log(`  hpu:${i} ${p.name}: ${p.totalMemory / 2 ** 30} GiB, limit ${p.memoryLimit / 2 ** 30} GiB`);
}

// Device memory on device 1, filled from a typed array and read back.
hpu.withDevice(1, () => {
  const values = Float32Array.from({ length: 1 << 18 }, (_, i) => i * 0.25);
  const mem = hpu.memAlloc(values.byteLength);
  mem.copyFromHost(values);
  const back = mem.copyToHost(new Float32Array(values.length));
  if (!back.every((v, i) => v === values[i])) throw new Error('round trip differs');
  const stats = hpu.memoryStats();
  console.log('memoryStats(hpu:1) with 1 MiB allocated:');
  for (const key of hpu.HABANA_STATS_KEYS) console.log(`  ${key.padEnd(18)} ${stats[key]}`);
  mem.free();
  console.log(`after free: InUse=${hpu.memoryAllocated()} MaxInUse=${hpu.maxMemoryAllocated()}`);
  hpu.resetPeakMemoryStats();
  console.log(`after resetPeakMemoryStats: MaxInUse=${hpu.maxMemoryAllocated()}`);
});

// Work queued on a stream, timed with events.
const stream = new hpu.Stream();
const start = new hpu.Event();
const end = new hpu.Event();
const mem = hpu.memAlloc(64 << 20);
start.record(stream);
mem.fill(0x5a, { stream });
end.record(stream);
end.synchronize();
console.log(`memset of 64 MiB on a stream: ${start.elapsedTime(end).toFixed(3)} ms`);
mem.free();
stream.close();

// Every failure is an HpuError with the status and libhpu's message.
try {
  hpu.memAlloc(hpu.memGetInfo().total + 1);
} catch (e) {
  if (!(e instanceof hpu.HpuError)) throw e;
  console.log(`caught ${e.code}: ${e.message}`);
}

// Tensors from typed arrays or nested arrays; bfloat16 rounded on the device.
const x = hpu.tensor([[1, 2, 3], [4, 5, 6]]);
console.log(`x = ${JSON.stringify(x.toList())}, x^T = ${JSON.stringify(x.transpose(0, 1).toList())}`);
console.log(`as bfloat16: ${x.to('bfloat16').bytes().toString('hex')} (raw bits)`);

// Collectives over four devices of this process, with torch.distributed's names.
const comms = hpu.Comm.initAll([0, 1, 2, 3]);
const grads = comms.map((c, r) => hpu.tensor(new Float32Array(4).fill(r + 1), { device: r }));
comms.forEach((c, r) => c.allReduce(grads[r], 'avg'));
comms.forEach((c) => c.synchronize());
console.log(`allReduce(avg) over ${comms.length} ranks: ${JSON.stringify(grads[3].toList())}`);
comms.forEach((c) => c.destroy());

// Ops under autocast: mm is in Habana's lower-precision list, so it runs in bfloat16.
const w = hpu.tensor([[0.5, -1], [2, 0.25], [1, 1]]);
const y = hpu.autocast({ dtype: 'bfloat16' }, () => hpu.relu(hpu.mm(x, w)));
console.log(`relu(x @ w) under autocast: ${JSON.stringify(y.toList())} (${y.dtype})`);
