'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const hpu = require('..');

test('log level', () => {
  const saved = hpu.getLogLevel();
  try {
    for (const level of hpu.LOG_LEVELS) {
      hpu.setLogLevel(level);
      assert.equal(hpu.getLogLevel(), level);
    }
  } finally {
    hpu.setLogLevel(saved);
  }
  assert.throws(() => hpu.setLogLevel('loud'), (e) => e.code === 'HPU_ERROR_INVALID_ARGUMENT');
});

test('profiler trace and summary', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hpu-node-'));
  const file = path.join(dir, 'trace.json');
  hpu.profilerStart(file);
  const mem = hpu.memAlloc(1 << 20);
  mem.fill(3);
  mem.free();
  hpu.profilerStop();
  const text = fs.readFileSync(file, 'utf8');
  JSON.parse(text);
  assert.match(text, /hpuMemset/);
  assert.equal(typeof hpu.profilerSummary(), 'string');
  fs.rmSync(dir, { recursive: true });
  assert.throws(() => hpu.profilerStop(), (e) => e instanceof hpu.HpuError && /hpuProfilerStop/.test(e.message));
});
