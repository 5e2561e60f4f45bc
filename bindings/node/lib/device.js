'use strict';
// Devices: count, selection, properties, synchronisation. As with torch.hpu, a
// device is opened on first use and stays open for the life of the process.

const { AsyncLocalStorage } = require('node:async_hooks');
const { C, sized } = require('./native');
const { invalidArgument } = require('./errors');

const handles = new Map();
const scope = new AsyncLocalStorage();
let globalDevice = 0;

function handleOf(index) {
  let h = handles.get(index);
  if (h === undefined) {
    const out = [null];
    C.hpuDeviceOpen(out, index);
    h = out[0];
    handles.set(index, h);
  }
  return h;
}

function indexOf(device) {
  if (device === undefined || device === null) return currentDevice();
  if (device instanceof Device) return device.index;
  if (typeof device === 'string') {
    const m = /^hpu(?::(\d+))?$/.exec(device);
    if (!m) throw invalidArgument(`device '${device}' is not 'hpu' or 'hpu:<index>'`);
    return m[1] === undefined ? currentDevice() : Number(m[1]);
  }
  if (Number.isInteger(device)) return device;
  throw new TypeError(`device must be an integer, 'hpu:<index>', an hpu.Device or undefined, not ${typeof device}`);
}

/**
 * An emulated HPU device: `new Device(i)` opens device i (throwing an HpuError
 * with code HPU_ERROR_NOT_FOUND when it does not exist); `new Device()` is the
 * current device.
 */
class Device {
  constructor(device) {
    this.index = indexOf(device);
    this.handle = handleOf(this.index);
    Object.freeze(this);
  }

  /** { name, profile, totalMemory, memoryLimit, ordinal, moduleId, kernelIsa } */
  get properties() {
    const p = sized('hpuDeviceProperties_t');
    C.hpuDeviceGetProperties(this.handle, p);
    return {
      name: p.name, profile: p.profile, totalMemory: p.total_memory, memoryLimit: p.memory_limit,
      ordinal: p.ordinal, moduleId: p.module_id, kernelIsa: p.kernel_isa,
    };
  }

  get name() {
    return this.properties.name;
  }

  /** Waits for all work queued on every stream of the device. */
  synchronize() {
    C.hpuDeviceSynchronize(this.handle);
  }

  equals(other) {
    return other instanceof Device && other.index === this.index;
  }

  toString() {
    return `hpu:${this.index}`;
  }
}

/** The Device whose open handle is `handle` (every handle the binding sees was opened by it). */
function deviceOfHandle(handle) {
  for (const [index, h] of handles) if (h === handle) return new Device(index);
  throw invalidArgument(`device handle ${handle} was not opened by this binding`);
}

/** The device argument of every function, as a Device (undefined: the current one). */
function resolve(device) {
  return device instanceof Device ? device : new Device(device);
}

/** Number of visible emulated devices (HPU_NUM_DEVICES, HPU_VISIBLE_DEVICES). */
function deviceCount() {
  const n = [0];
  C.hpuDeviceCount(n);
  return n[0];
}

/** True when at least one device is visible; never throws. */
function isAvailable() {
  try {
    return deviceCount() > 0;
  } catch {
    return false;
  }
}

/** Index of the current device: the one withDevice() set for this call chain, else setDevice()'s. */
function currentDevice() {
  const inner = scope.getStore();
  return inner === undefined ? globalDevice : inner;
}

/** Makes `device` the current device outside withDevice() blocks (opening it: a bad index throws here). */
function setDevice(device) {
  globalDevice = new Device(device).index;
}

/**
 * Runs fn(device) with `device` as the current device, and returns its result.
 * The choice follows fn's asynchronous continuations (AsyncLocalStorage), so an
 * async fn keeps it across awaits without leaking it to other tasks.
 */
function withDevice(device, fn) {
  const d = new Device(device);
  return scope.run(d.index, fn, d);
}

function getDeviceProperties(device) {
  return resolve(device).properties;
}

function getDeviceName(device) {
  return resolve(device).name;
}

/** Waits for all work queued on `device` (the current one by default). */
function synchronize(device) {
  resolve(device).synchronize();
}

module.exports = {
  Device, resolve, deviceOfHandle, deviceCount, isAvailable, currentDevice, setDevice, withDevice,
  getDeviceProperties, getDeviceName, synchronize,
};
