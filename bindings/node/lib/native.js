'use strict';
// Finds libhpu, loads it with koffi and declares the C functions.
//
// The library is looked for at $HPU_LIBRARY (when set, nothing else is tried),
// next to the package (libhpu.so.0 in its folder), then as libhpu.so.0 on the
// system library path. Every function returning hpuStatus_t throws an HpuError
// on failure, so callers just call it.

const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');
const { HpuError } = require('./errors');

const ABI_MAJOR = 0;
const SONAME = `libhpu.so.${ABI_MAJOR}`;

function load() {
  const explicit = process.env.HPU_LIBRARY;
  if (explicit) {
    try {
      return [koffi.load(explicit), explicit];
    } catch (e) {
      throw new Error(`hpu: cannot load HPU_LIBRARY=${explicit}: ${e.message}`);
    }
  }
  const tried = [];
  const bundled = path.join(__dirname, '..', SONAME);
  if (fs.existsSync(bundled)) {
    try {
      return [koffi.load(bundled), bundled];
    } catch (e) {
      tried.push(`${bundled}: ${e.message}`);
    }
  } else {
    tried.push(`${bundled}: no such file`);
  }
  try {
    return [koffi.load(SONAME), SONAME];
  } catch (e) {
    tried.push(`${SONAME} on the system library path: ${e.message}`);
  }
  throw new Error(`hpu: cannot find libhpu; set HPU_LIBRARY to its path. Tried:\n  ${tried.join('\n  ')}`);
}

const [lib, libraryPath] = load();

// Opaque handles and device pointers are BigInts (null for NULL).
koffi.alias('hpuHandle', 'void *');

const DeviceProperties = koffi.struct('hpuDeviceProperties_t', {
  struct_size: 'size_t',
  name: 'char[64]',
  profile: 'char[16]',
  total_memory: 'uint64_t',
  memory_limit: 'uint64_t',
  ordinal: 'int',
  module_id: 'int',
});

const MemStats = koffi.struct('hpuMemStats_t', {
  struct_size: 'size_t',
  limit: 'uint64_t',
  in_use: 'uint64_t',
  max_in_use: 'uint64_t',
  num_allocs: 'uint64_t',
  num_frees: 'uint64_t',
  active_allocs: 'int64_t',
  max_alloc_size: 'uint64_t',
  total_system_allocs: 'uint64_t',
  total_system_frees: 'uint64_t',
  total_active_allocs: 'int64_t',
  reserved_bytes: 'uint64_t',
  segment_allocs: 'uint64_t',
  segment_frees: 'uint64_t',
});

const getErrorName = lib.func('const char *hpuGetErrorName(int status)');
const getLastErrorMessage = lib.func('const char *hpuGetLastErrorMessage(void)');
const getVersion = lib.func('int hpuGetVersion(void)');
/** Releases memory libhpu allocated for the caller. */
const hpuFree = lib.func('void hpuFree(void *ptr)');

/** The NUL-terminated UTF-8 string at `ptr` ('' for NULL). */
function readString(ptr) {
  return ptr ? koffi.decode.string(ptr) : '';
}

const versionNumber = getVersion();
if (versionNumber >> 16 !== ABI_MAJOR) {
  throw new Error(`hpu: ${libraryPath} is libhpu ${versionNumber >> 16}.x; this binding needs ${ABI_MAJOR}.x`);
}

/** Wraps a function returning hpuStatus_t so that a failure throws. */
function checked(prototype) {
  let fn;
  try {
    fn = lib.func(prototype);
  } catch (e) {
    const name = /(\w+)\s*\(/.exec(prototype)[1];
    return () => {
      throw new HpuError(7, `${name}: this libhpu (${libraryPath}) does not export it; it is older than the binding`);
    };
  }
  return (...args) => {
    const status = fn(...args);
    if (status !== 0) throw new HpuError(status, getLastErrorMessage());
    return status;
  };
}

/** Declares functions returning hpuStatus_t: { name: prototype } → { name: checked function }. */
function declare(prototypes) {
  const out = {};
  for (const [name, prototype] of Object.entries(prototypes)) out[name] = checked(prototype);
  return out;
}

const C = declare({
  hpuDeviceCount: 'int hpuDeviceCount(_Out_ int *count)',
  hpuDeviceOpen: 'int hpuDeviceOpen(_Out_ hpuHandle *dev, int ordinal)',
  hpuDeviceClose: 'int hpuDeviceClose(hpuHandle dev)',
  hpuDeviceGetProperties: 'int hpuDeviceGetProperties(hpuHandle dev, _Inout_ hpuDeviceProperties_t *props)',
  hpuDeviceSynchronize: 'int hpuDeviceSynchronize(hpuHandle dev)',
  hpuDeviceGetDefaultStream: 'int hpuDeviceGetDefaultStream(hpuHandle dev, _Out_ hpuHandle *stream)',
  hpuStreamCreate: 'int hpuStreamCreate(_Out_ hpuHandle *stream, hpuHandle dev)',
  hpuStreamDestroy: 'int hpuStreamDestroy(hpuHandle stream)',
  hpuStreamSynchronize: 'int hpuStreamSynchronize(hpuHandle stream)',
  hpuStreamQuery: 'int hpuStreamQuery(hpuHandle stream)',
  hpuStreamWaitEvent: 'int hpuStreamWaitEvent(hpuHandle stream, hpuHandle event)',
  hpuEventCreate: 'int hpuEventCreate(_Out_ hpuHandle *event)',
  hpuEventDestroy: 'int hpuEventDestroy(hpuHandle event)',
  hpuEventRecord: 'int hpuEventRecord(hpuHandle stream, hpuHandle event)',
  hpuEventSynchronize: 'int hpuEventSynchronize(hpuHandle event)',
  hpuEventQuery: 'int hpuEventQuery(hpuHandle event)',
  hpuEventElapsedTime: 'int hpuEventElapsedTime(hpuHandle start, hpuHandle end, _Out_ float *ms)',
  hpuMemAlloc: 'int hpuMemAlloc(_Out_ hpuHandle *ptr, hpuHandle dev, size_t bytes)',
  hpuMemFree: 'int hpuMemFree(hpuHandle ptr)',
  hpuMemcpy: 'int hpuMemcpy(void *dst, const void *src, size_t bytes, int kind)',
  hpuMemcpyAsync: 'int hpuMemcpyAsync(hpuHandle stream, void *dst, const void *src, size_t bytes, int kind)',
  hpuMemcpyRowsAsync:
    'int hpuMemcpyRowsAsync(hpuHandle stream, void *dst, const void *src, size_t row_bytes, const int64_t *rows, size_t count, int kind)',
  hpuMemset: 'int hpuMemset(void *dst, int value, size_t bytes)',
  hpuMemsetAsync: 'int hpuMemsetAsync(hpuHandle stream, void *dst, int value, size_t bytes)',
  hpuMemGetInfo: 'int hpuMemGetInfo(hpuHandle dev, _Out_ size_t *free_bytes, _Out_ size_t *total_bytes)',
  hpuMemEmptyCache: 'int hpuMemEmptyCache(hpuHandle dev)',
  hpuMemStats: 'int hpuMemStats(hpuHandle dev, void *stats)', // a Buffer: faster than koffi's struct conversion
  hpuMemResetPeakStats: 'int hpuMemResetPeakStats(hpuHandle dev)',
  hpuMemResetAccumulatedStats: 'int hpuMemResetAccumulatedStats(hpuHandle dev)',
});

const HOST_TO_DEVICE = 1;
const DEVICE_TO_HOST = 2;
const DEVICE_TO_DEVICE = 3;

/** A struct value with struct_size set, as the C _INIT macros do. */
function sized(type) {
  return { struct_size: koffi.sizeof(type) };
}

module.exports = {
  koffi, lib, libraryPath, versionNumber, C, declare, sized, getErrorName, getLastErrorMessage, hpuFree, readString,
  DeviceProperties, MemStats, HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE,
};
