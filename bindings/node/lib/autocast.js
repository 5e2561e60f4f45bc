'use strict';
// Habana-style autocast. autocast(options, fn) runs fn with an autocast region:
// the ops it enqueues run in the precision Habana's op lists give them. The
// region follows fn's asynchronous continuations (AsyncLocalStorage) and is
// applied to libhpu's per-thread state around each call that depends on it, so
// concurrent async tasks never see each other's regions.

const { AsyncLocalStorage } = require('node:async_hooks');
const { C, hpuFree, readString } = require('./native');
const { invalidArgument } = require('./errors');
const { dtypeInfo, dtypeName } = require('./dtypes');


const region = new AsyncLocalStorage();

/** The op lists, in precedence order. */
const AUTOCAST_LISTS = Object.freeze(['lower_precision', 'fp32', 'promote']);

/** Runs call() with this async context's autocast region applied to libhpu's thread state. */
function underAutocast(call) {
  const r = region.getStore();
  if (r === undefined) return call();
  C.hpuAutocastPush(r.enabled ? 1 : 0, r.dtype);
  try {
    return call();
  } finally {
    C.hpuAutocastPop();
  }
}

/**
 * autocast(fn) / autocast({ dtype = 'bfloat16', enabled = true }, fn): runs fn()
 * under an autocast region and returns its result (a promise if fn is async).
 * Regions nest; enabled: false turns autocast off inside an enclosing region.
 */
function autocast(options, fn) {
  if (typeof options === 'function') [options, fn] = [{}, options];
  if (typeof fn !== 'function') throw new TypeError('autocast needs a callback');
  const { dtype = 'bfloat16', enabled = true } = options ?? {};
  if (dtype !== 'bfloat16' && dtype !== 'float16') {
    throw invalidArgument(`dtype ${JSON.stringify(dtype)} is not 'bfloat16' or 'float16'`);
  }
  return region.run({ enabled: Boolean(enabled), dtype: dtypeInfo(dtype).value }, fn);
}

function state() {
  const enabled = [0];
  const dtype = [0];
  underAutocast(() => C.hpuAutocastGetState(enabled, dtype));
  return { enabled: enabled[0] !== 0, dtype: dtypeName(dtype[0]) };
}

/** Whether the current region enables autocast. */
const isAutocastEnabled = () => state().enabled;
/** The lower-precision dtype of the current region ('bfloat16' outside any). */
const getAutocastDtype = () => state().dtype;

function listIndex(which) {
  const i = AUTOCAST_LISTS.indexOf(which);
  if (i < 0) throw invalidArgument(`list ${JSON.stringify(which)} is not one of ${AUTOCAST_LISTS.join(', ')}`);
  return i;
}

/** The op names of one list ('lower_precision', 'fp32' or 'promote'), sorted. */
function getAutocastOpList(which) {
  const out = [null];
  C.hpuAutocastGetOpList(listIndex(which), out);
  try {
    return readString(out[0]).split('\n').filter((s) => s.length > 0);
  } finally {
    hpuFree(out[0]);
  }
}

/** Replaces one list for the whole process, for ops enqueued afterwards. */
function setAutocastOpList(which, ops) {
  if (!Array.isArray(ops) || !ops.every((s) => typeof s === 'string')) {
    throw new TypeError('ops must be an array of strings');
  }
  C.hpuAutocastSetOpList(listIndex(which), ops.length ? ops : [null], ops.length);
}

/** The dtype the first tensor input of `op` would run in if enqueued now, given its inputs' dtypes. */
function autocastOpDtype(op, ...inputDtypes) {
  if (inputDtypes.length === 0) throw invalidArgument('autocastOpDtype needs the dtype of at least one input');
  const values = Int32Array.from(inputDtypes, (d) => dtypeInfo(d).value);
  const out = [0];
  underAutocast(() => C.hpuAutocastGetOpDtype(String(op), values, values.length, out));
  return dtypeName(out[0]);
}

module.exports = {
  AUTOCAST_LISTS, autocast, underAutocast, isAutocastEnabled, getAutocastDtype, getAutocastOpList,
  setAutocastOpList, autocastOpDtype,
};
