'use strict';
// Helpers shared by the binding's tests.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const PACKAGE_ROOT = path.join(__dirname, '..');

/** Runs `code` in a fresh node (libhpu reads its environment once per process). */
function runNode(code, env = {}) {
  const r = spawnSync(process.execPath, ['-e', code], {
    cwd: PACKAGE_ROOT, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Asserts that a tensor's (or an array's) elements are within tol (relative, plus tol absolute) of want. */
function near(got, want, tol = 1e-4) {
  const hpu = require('..');
  const g = Array.from(got instanceof hpu.Tensor ? got.data() : got, Number);
  assert.equal(g.length, want.length);
  g.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= tol * (1 + Math.abs(want[i])), `[${i}] ${v} vs ${want[i]}`));
}

/** n deterministic values in [-2, 2), different for each seed: inputs for the references. */
const values = (n, seed) => Array.from({ length: n }, (_, i) => (((i + 1) * 7919 * seed) % 400) / 100 - 2);

module.exports = { PACKAGE_ROOT, runNode, near, values };
