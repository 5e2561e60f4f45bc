'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { PACKAGE_ROOT } = require('./support');

test('examples/node_quickstart.js runs and shows what it promises', () => {
  const example = path.join(PACKAGE_ROOT, '..', '..', 'examples', 'node_quickstart.js');
  const r = spawnSync(process.execPath, [example], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /libhpu \d+\.\d+\.\d+: 8 devices/);
  assert.match(r.stdout, /\n {2}InUse {14}1048576\n/);
  assert.match(r.stdout, /after resetPeakMemoryStats: MaxInUse=0/);
  assert.match(r.stdout, /caught HPU_ERROR_OUT_OF_MEMORY: hpuMemAlloc:/);
});
