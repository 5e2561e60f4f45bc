'use strict';
// Comm.fromEnv: ranks from a launcher's environment, between processes.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const net = require('node:net');
const { PACKAGE_ROOT, runNode } = require('./support');

const WORKER = `
const hpu = require('.');
const [comm] = hpu.Comm.fromEnv([0]);
const t = hpu.tensor(Array(5).fill(comm.rank + 1), { device: 0 });
comm.allReduce(t);
comm.synchronize();
console.log(JSON.stringify([comm.rank, comm.worldSize, t.toList()]));
comm.destroy();
`;

function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

function run(env) {
  return new Promise((ok) => {
    const p = spawn(process.execPath, ['-e', WORKER], { cwd: PACKAGE_ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('close', (status) => {
      clearTimeout(timer);
      ok({ status, stdout, stderr });
    });
  });
}

test('allReduce between two processes launched torchrun-style', async () => {
  const port = await freePort();
  const results = await Promise.all([0, 1].map((rank) => run({
    MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), WORLD_SIZE: '2', RANK: String(rank),
    LOCAL_RANK: String(rank), HPU_COMM_TIMEOUT: '20',
  })));
  for (const r of results) assert.equal(r.status, 0, r.stderr);
  const lines = results.map((r) => JSON.parse(r.stdout.trim())).sort();
  assert.deepEqual(lines, [[0, 2, [3, 3, 3, 3, 3]], [1, 2, [3, 3, 3, 3, 3]]]);
});

test('without a launcher fromEnv is initAll', () => {
  const env = { MASTER_ADDR: '', MASTER_PORT: '', WORLD_SIZE: '', RANK: '', HPU_COMM_ID: '' };
  const r = runNode(`
    for (const k of ${JSON.stringify(Object.keys(env))}) delete process.env[k];
    const hpu = require('.');
    const comms = hpu.Comm.fromEnv([0, 1]);
    console.log(JSON.stringify(comms.map((c) => [c.rank, c.worldSize, c.device.index])));
    comms.forEach((c) => c.destroy());
  `);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [[0, 2, 0], [1, 2, 1]]);
});

test('a missing launcher variable is named', () => {
  const r = runNode(`
    delete process.env.MASTER_ADDR;
    delete process.env.HPU_COMM_ID;
    const hpu = require('.');
    try {
      hpu.Comm.fromEnv([0]);
      console.log('joined');
    } catch (e) {
      console.log(e instanceof hpu.HpuError, e.code, /MASTER_ADDR/.test(e.message));
    }
  `, { MASTER_PORT: '29999', WORLD_SIZE: '2', RANK: '0' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'true HPU_ERROR_CONFIG true');
});
