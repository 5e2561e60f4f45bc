'use strict';
// Helpers shared by the binding's tests.
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

module.exports = { PACKAGE_ROOT, runNode };
