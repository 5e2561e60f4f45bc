'use strict';
// Finds libhpu, loads it with koffi and declares the C functions.
//
// The library is looked for at $HPU_LIBRARY (when set, nothing else is tried),
// next to the package (libhpu.so.0 in its folder), where cmake --install put it
// (lib/location.js, written by the install), then as libhpu.so.0 on the system
// library path. Declares every function abi.js lists (generated from the
// C headers by tools/abi/gen_bindings.py); each returning hpuStatus_t throws an
// HpuError on failure, so callers just call it.

const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');
const { HpuError } = require('./errors');
const abi = require('./abi');

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
  const location = path.join(__dirname, 'location.js');
  if (fs.existsSync(location)) {
    const { relative, absolute } = require(location);
    for (const installed of [path.resolve(__dirname, relative), absolute]) {
      if (!fs.existsSync(installed)) {
        tried.push(`${installed} (lib/location.js): no such file`);
        continue;
      }
      try {
        return [koffi.load(installed), installed];
      } catch (e) {
        tried.push(`${installed} (lib/location.js): ${e.message}`);
      }
    }
  }
  try {
    return [koffi.load(SONAME), SONAME];
  } catch (e) {
    tried.push(`${SONAME} on the system library path: ${e.message}`);
  }
  throw new Error(`hpu: cannot find libhpu; set HPU_LIBRARY to its path. Tried:\n  ${tried.join('\n  ')}`);
}

const [lib, libraryPath] = load();

// The C types, as abi.js (generated from the headers) names them: opaque handles
// and device pointers are BigInts (null for NULL), enums ints.
for (const name of abi.HANDLES) koffi.alias(name, 'void *');
for (const name of Object.keys(abi.ENUMS)) koffi.alias(name, 'int');
for (const [name, fields] of Object.entries(abi.STRUCTS)) koffi.struct(name, fields);
for (const [name, prototype] of Object.entries(abi.CALLBACKS)) {
  koffi.pointer(name, koffi.proto(prototype.replace(`${name}(`, `${name}_fn(`)));
}

const getErrorName = lib.func(abi.FUNCTIONS.hpuGetErrorName[1]);
const getLastErrorMessage = lib.func(abi.FUNCTIONS.hpuGetLastErrorMessage[1]);
const getVersion = lib.func(abi.FUNCTIONS.hpuGetVersion[1]);
/** Releases memory libhpu allocated for the caller. */
const hpuFree = lib.func(abi.FUNCTIONS.hpuFree[1]);

/** The NUL-terminated UTF-8 string at `ptr` ('' for NULL). */
function readString(ptr) {
  return ptr ? koffi.decode.string(ptr) : '';
}

const versionNumber = getVersion();
if (versionNumber >> 16 !== ABI_MAJOR) {
  throw new Error(`hpu: ${libraryPath} is libhpu ${versionNumber >> 16}.x; this binding needs ${ABI_MAJOR}.x`);
}

/** Wraps a function returning hpuStatus_t so that a failure throws. */
function checked(fn) {
  return (...args) => {
    const status = fn(...args);
    if (status !== 0) throw new HpuError(status, getLastErrorMessage());
    return status;
  };
}

/**
 * libhpu's functions, declared from abi.FUNCTIONS (generated from the headers): C.hpuMemAlloc, ...
 * Those returning hpuStatus_t throw an HpuError when they fail. raw(name) is the unwrapped koffi
 * function (for its .async form).
 */
const C = {};
const raws = {};
for (const [name, [library, prototype]] of Object.entries(abi.FUNCTIONS)) {
  if (library !== 'hpu') continue;
  let fn;
  try {
    fn = lib.func(prototype);
  } catch (e) {
    C[name] = () => {
      throw new HpuError(abi.Status.UNSUPPORTED, `${name}: this libhpu (${libraryPath}) does not export it; it is older than the binding`);
    };
    continue;
  }
  raws[name] = fn;
  C[name] = prototype.startsWith('hpuStatus_t ') ? checked(fn) : fn;
}
const raw = (name) => raws[name];

const { HPU_MEMCPY_HOST_TO_DEVICE: HOST_TO_DEVICE, HPU_MEMCPY_DEVICE_TO_HOST: DEVICE_TO_HOST,
  HPU_MEMCPY_DEVICE_TO_DEVICE: DEVICE_TO_DEVICE } = abi.CONSTANTS;

/** A struct value with struct_size set, as the C _INIT macros do. */
function sized(type) {
  return { struct_size: koffi.sizeof(type) };
}

module.exports = {
  koffi, lib, libraryPath, versionNumber, abi, C, raw, sized, getErrorName, getLastErrorMessage, hpuFree, readString,
  HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE,
};
