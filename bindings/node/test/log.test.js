'use strict';
// libhpu's log lines reach a JavaScript callback, from every thread, without
// deadlocking a main thread that waits in libhpu.
const test = require('node:test');
const assert = require('node:assert/strict');
const hpu = require('..');
const { runNode } = require('./support');

/** Resolves once `got` holds at least `n` records matching `pred`, or rejects after 10 s. */
function waitFor(got, pred, n = 1) {
  return new Promise((ok, fail) => {
    const deadline = Date.now() + 10000;
    const poll = () => {
      const hits = got.filter(pred);
      if (hits.length >= n) ok(hits);
      else if (Date.now() > deadline) fail(new Error(`only ${hits.length} of ${n} lines: ${JSON.stringify(got)}`));
      else setTimeout(poll, 10);
    };
    poll();
  });
}

test('log lines reach the callback', async (t) => {
  const saved = hpu.getLogLevel();
  const got = [];
  hpu.setLogCallback((level, line, record) => got.push({ level, line, ...record }));
  t.after(() => {
    hpu.setLogCallback(null);
    hpu.setLogLevel(saved);
  });

  await t.test('a line of the binding, parsed', async () => {
    hpu.logWrite('warn', 'disk almost full');
    const [r] = await waitFor(got, (x) => x.message === 'disk almost full');
    assert.equal(r.level, 'warn');
    assert.equal(r.component, 'node');
    assert.equal(r.pid, process.pid);
    assert.match(r.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.match(r.line, / WARN node: disk almost full$/);
  });

  await t.test('the library level filters', async () => {
    hpu.setLogLevel('warn');
    hpu.logWrite('info', 'dropped', 'filtertest');
    hpu.logWrite('error', 'kept', 'filtertest');
    await waitFor(got, (x) => x.component === 'filtertest');
    assert.deepEqual(got.filter((x) => x.component === 'filtertest').map((x) => x.message), ['kept']);
  });

  await t.test('lines of libhpu threads while the main thread waits in libhpu', async () => {
    // Each rank joins its group on a thread of its own and logs there (info),
    // while hpuCommInitAll holds the main thread until all have joined.
    hpu.setLogLevel('info');
    const comms = hpu.Comm.initAll([0, 1, 2, 3]);
    comms.forEach((c) => c.destroy());
    const joined = await waitFor(got, (x) => x.component === 'comm' && /joined group/.test(x.message), 4);
    assert.deepEqual(joined.map((x) => Number(/rank (\d+) of 4/.exec(x.message)[1])).sort(), [0, 1, 2, 3]);
  });

  await t.test('bad input', () => {
    assert.throws(() => hpu.logWrite('loud', 'x'), (e) => e.code === 'HPU_ERROR_INVALID_ARGUMENT');
    assert.throws(() => hpu.logWrite('warn', 'x', 'has space'),
      (e) => e.code === 'HPU_ERROR_INVALID_ARGUMENT' && /component/.test(e.message));
    assert.throws(() => hpu.setLogCallback(42), TypeError);
  });
});

test('null restores stderr, and the pipe does not keep the process alive', () => {
  const r = runNode(`
    const hpu = require('.');
    hpu.setLogCallback(() => {});
    hpu.setLogCallback(null);
    hpu.logWrite('warn', 'back on stderr');
    hpu.setLogCallback(() => {});
  `);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, / WARN node: back on stderr\n/);
});
