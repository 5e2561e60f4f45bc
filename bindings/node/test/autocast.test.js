'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const hpu = require('..');
const { runNode } = require('./support');

const isHpuError = (code) => (e) => e instanceof hpu.HpuError && e.code === code;

test('outside any region', () => {
  assert.equal(hpu.isAutocastEnabled(), false);
  assert.equal(hpu.getAutocastDtype(), 'bfloat16');
  assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'float32');
});

test('regions nest and return the callback result', () => {
  const r = hpu.autocast({ dtype: 'bfloat16' }, () => {
    assert.equal(hpu.isAutocastEnabled(), true);
    assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'bfloat16');
    hpu.autocast({ enabled: false }, () => {
      assert.equal(hpu.isAutocastEnabled(), false);
      assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'float32');
    });
    hpu.autocast({ dtype: 'float16' }, () => assert.equal(hpu.autocastOpDtype('linear', 'float32'), 'float16'));
    return 42;
  });
  assert.equal(r, 42);
  assert.equal(hpu.isAutocastEnabled(), false);
});

test('the op lists decide', () => {
  hpu.autocast(() => {
    assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'bfloat16');
    assert.equal(hpu.autocastOpDtype('tan', 'bfloat16'), 'float32');
    assert.equal(hpu.autocastOpDtype('add', 'bfloat16', 'float32'), 'float32');
    assert.equal(hpu.autocastOpDtype('relu', 'float32'), 'float32');
    assert.equal(hpu.autocastOpDtype('mm', 'int32'), 'int32');
  });
});

test('an async callback keeps its region, and does not leak it', async () => {
  let release;
  const gate = new Promise((r) => { release = r; });
  const inside = hpu.autocast(async () => {
    await gate;
    return [hpu.isAutocastEnabled(), hpu.autocastOpDtype('mm', 'float32')];
  });
  assert.equal(hpu.isAutocastEnabled(), false);
  assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'float32');
  release();
  assert.deepEqual(await inside, [true, 'bfloat16']);
});

test('exceptions leave the region', () => {
  assert.throws(() => hpu.autocast(() => { throw new RangeError('x'); }), RangeError);
  assert.equal(hpu.isAutocastEnabled(), false);
});

test('bad arguments', () => {
  assert.throws(() => hpu.autocast({ dtype: 'float32' }, () => {}), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.autocast({}), TypeError);
  assert.throws(() => hpu.autocastOpDtype('mm'), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.autocastOpDtype('mm', 'float8'), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
  assert.throws(() => hpu.getAutocastOpList('lower'), isHpuError('HPU_ERROR_INVALID_ARGUMENT'));
});

test('default op lists', () => {
  assert.equal(hpu.getAutocastOpList('lower_precision').length, 27);
  assert.equal(hpu.getAutocastOpList('fp32').length, 49);
  assert.deepEqual(hpu.getAutocastOpList('promote'),
    ['add', 'addcdiv', 'addcmul', 'cat', 'div', 'exp', 'iadd', 'mul', 'pow', 'stack', 'sub', 'truediv']);
});

test('overriding a list from JavaScript', () => {
  const saved = hpu.getAutocastOpList('lower_precision');
  try {
    hpu.setAutocastOpList('lower_precision', ['tan', 'relu']);
    assert.deepEqual(hpu.getAutocastOpList('lower_precision'), ['relu', 'tan']);
    hpu.autocast(() => {
      assert.equal(hpu.autocastOpDtype('tan', 'float32'), 'bfloat16');
      assert.equal(hpu.autocastOpDtype('mm', 'float32'), 'float32');
    });
    hpu.setAutocastOpList('lower_precision', []);
    assert.deepEqual(hpu.getAutocastOpList('lower_precision'), []);
  } finally {
    hpu.setAutocastOpList('lower_precision', saved);
  }
  assert.deepEqual(hpu.getAutocastOpList('lower_precision'), saved);
});

test("overriding a list with Habana's variables", () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hpu-node-')), 'lower.txt');
  fs.writeFileSync(file, '# my list\n  tan  \nmm\n');
  const r = runNode(`const hpu = require('.');
    console.log(hpu.getAutocastOpList('lower_precision').join(','));
    hpu.autocast(() => console.log(hpu.autocastOpDtype('tan', 'float32'), hpu.autocastOpDtype('linear', 'float32')));`,
  { PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST: file });
  fs.rmSync(path.dirname(file), { recursive: true });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'mm,tan\nbfloat16 float32\n');
});
