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
  assert.match(r.stdout, /x\^T = \[\[1,4\],\[2,5\],\[3,6\]\]/);
  assert.match(r.stdout, /as bfloat16: 803f004040408040a040c040 \(raw bits\)/);
  assert.match(r.stdout, /allReduce\(avg\) over 4 ranks: \[2.5,2.5,2.5,2.5\]/);
  assert.match(r.stdout, /relu\(x @ w\) under autocast: \[\[7.5,2.5\],\[18,3.25\]\] \(bfloat16\)/);
});
