'use strict';
// Device memory: Habana's memory statistics and raw allocations.

const { koffi, abi, C, HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE } = require('./native');
const { Status, HpuError, invalidArgument } = require('./errors');
const { resolve } = require('./device');

/** Habana's ten keys of torch.hpu.memory_stats(), in Habana's order. */
const HABANA_STATS_KEYS = Object.freeze(['Limit', 'InUse', 'MaxInUse', 'NumAllocs', 'NumFrees', 'ActiveAllocs',
  'MaxAllocSize', 'TotalSystemAllocs', 'TotalSystemFrees', 'TotalActiveAllocs']);
/** The three figures libhpu's caching allocator adds after them. */
const ALLOCATOR_STATS_KEYS = Object.freeze(['ReservedBytes', 'SegmentAllocs', 'SegmentFrees']);
// hpuMemStats_t's figures, in the keys' order, and those that are signed.
const FIELDS = Object.keys(abi.STRUCTS.hpuMemStats_t).filter((f) => f !== 'struct_size');
const SIGNED = new Set(FIELDS.filter((f) => abi.STRUCTS.hpuMemStats_t[f] === 'int64_t'));

// hpuMemStats_t read from a Buffer: struct_size, then 13 64-bit figures (two of them signed).
const STATS_BYTES = koffi.sizeof('hpuMemStats_t');

function stats(device) {
  const buf = Buffer.alloc(STATS_BYTES);
  buf.writeBigUInt64LE(BigInt(STATS_BYTES), 0);
  C.hpuMemStats(resolve(device).handle, buf);
  const s = {};
  FIELDS.forEach((f, i) => {
    s[f] = Number(SIGNED.has(f) ? buf.readBigInt64LE(8 + 8 * i) : buf.readBigUInt64LE(8 + 8 * i));
  });
  return s;
}

/**
 * The device's memory figures: Habana's ten keys (Limit, InUse, MaxInUse, NumAllocs,
 * NumFrees, ActiveAllocs, MaxAllocSize, TotalSystemAllocs, TotalSystemFrees,
 * TotalActiveAllocs), then ReservedBytes, SegmentAllocs, SegmentFrees.
 */
function memoryStats(device) {
  const s = stats(device);
  const out = {};
  [...HABANA_STATS_KEYS, ...ALLOCATOR_STATS_KEYS].forEach((key, i) => { out[key] = s[FIELDS[i]]; });
  return out;
}

/** Bytes held by live allocations (InUse). */
const memoryAllocated = (device) => stats(device).in_use;
/** Peak of InUse since the last reset (MaxInUse). */
const maxMemoryAllocated = (device) => stats(device).max_in_use;
/** MaxInUse = 0, as Habana does. */
const resetPeakMemoryStats = (device) => { C.hpuMemResetPeakStats(resolve(device).handle); };
/** NumAllocs = NumFrees = MaxAllocSize = 0, MaxInUse = InUse. */
const resetAccumulatedMemoryStats = (device) => { C.hpuMemResetAccumulatedStats(resolve(device).handle); };
/** Gives the allocator's cached, unused segments back to the system. */
const emptyCache = (device) => { C.hpuMemEmptyCache(resolve(device).handle); };

/** { free, total } bytes: (Limit - InUse, Limit). */
function memGetInfo(device) {
  const free = [0];
  const total = [0];
  C.hpuMemGetInfo(resolve(device).handle, free, total);
  return { free: free[0], total: total[0] };
}

/** The bytes of a Buffer, TypedArray, DataView or ArrayBuffer, as a Uint8Array view (no copy). */
function bytesOf(data, name) {
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer || data instanceof SharedArrayBuffer) return new Uint8Array(data);
  throw new TypeError(`${name} must be a Buffer, TypedArray, DataView or ArrayBuffer, not ${typeof data}`);
}

function checkCount(value, name) {
  if (!Number.isSafeInteger(value) || value < 0) throw invalidArgument(`${name} ${value} is not a non-negative integer`);
}

const reaper = new FinalizationRegistry((ptr) => {
  try { C.hpuMemFree(ptr); } catch { /* the process may be ending */ }
});

/**
 * A block of device memory (hpuMemAlloc), freed by free() or when collected.
 * Host data goes in and out as Buffers, TypedArrays or ArrayBuffers; host copies
 * are synchronous.
 */
class DeviceMemory {
  constructor(nbytes, device) {
    checkCount(nbytes, 'nbytes');
    this.device = resolve(device);
    const out = [null];
    C.hpuMemAlloc(out, this.device.handle, nbytes);
    this.nbytes = nbytes;
    this._ptr = out[0] ?? 0n;
    this._live = true;
    reaper.register(this, out[0], this);
  }

  /** The device address, a BigInt (throws once freed). */
  get ptr() {
    if (!this._live) {
      throw new HpuError(Status.INVALID_HANDLE,
        `this DeviceMemory of ${this.nbytes} bytes on hpu:${this.device.index} was freed`);
    }
    return this._ptr;
  }

  _at(offset, nbytes, what) {
    checkCount(offset, `${what}: offset`);
    if (offset + nbytes > this.nbytes) {
      throw invalidArgument(`${what}: ${nbytes} bytes at offset ${offset} do not fit in ${this.nbytes} bytes of device memory`);
    }
    return this.ptr + BigInt(offset);
  }

  /** Copies the bytes of `data` to this memory at `offset`. */
  copyFromHost(data, offset = 0) {
    const src = bytesOf(data, 'data');
    const dst = this._at(offset, src.byteLength, 'copyFromHost');
    if (src.byteLength) C.hpuMemcpy(dst, src, src.byteLength, HOST_TO_DEVICE);
  }

  /**
   * Gathers rows of `data` (read as rows of `rowBytes` bytes) into this memory at
   * `offset`, one after another: row i here is row rows[i] of `data`
   * (hpuMemcpyRowsAsync, waited for like the other host copies).
   */
  copyRowsFromHost(data, rowBytes, rows, offset = 0) {
    const src = bytesOf(data, 'data');
    checkCount(rowBytes, 'rowBytes');
    const held = rowBytes ? Math.floor(src.byteLength / rowBytes) : 0;
    rows.forEach((r, i) => {
      if (!Number.isSafeInteger(r) || r < 0 || r >= held) {
        throw invalidArgument(`rows[${i}] is ${r}; data holds ${held} rows of ${rowBytes} bytes`);
      }
    });
    const dst = this._at(offset, rows.length * rowBytes, 'copyRowsFromHost');
    if (!rows.length || !rowBytes) return;
    C.hpuMemcpyRowsAsync(null, dst, src, rowBytes, BigInt64Array.from(rows, BigInt), rows.length, HOST_TO_DEVICE);
    this.device.synchronize();
  }

  /**
   * Copies device bytes from `offset` into `target` (all of it is filled) and
   * returns it; without `target`, returns a new Buffer of the rest of the memory.
   */
  copyToHost(target, offset = 0) {
    const out = target ?? Buffer.alloc(Math.max(0, this.nbytes - offset));
    const dst = bytesOf(out, 'target');
    const src = this._at(offset, dst.byteLength, 'copyToHost');
    if (dst.byteLength) C.hpuMemcpy(dst, src, dst.byteLength, DEVICE_TO_HOST);
    return out;
  }

  /**
   * Device-to-device copy from `src`: { nbytes (all of src from srcOffset), offset,
   * srcOffset, stream } — queued on `stream` when given, otherwise synchronous.
   */
  copyFrom(src, { nbytes, offset = 0, srcOffset = 0, stream } = {}) {
    const n = nbytes ?? src.nbytes - srcOffset;
    checkCount(n, 'nbytes');
    const s = src._at(srcOffset, n, 'copyFrom (source)');
    const d = this._at(offset, n, 'copyFrom (destination)');
    if (n === 0) return;
    if (stream) C.hpuMemcpyAsync(stream.handle, d, s, n, DEVICE_TO_DEVICE);
    else C.hpuMemcpy(d, s, n, DEVICE_TO_DEVICE);
  }

  /** Sets bytes to `value` (0..255): { nbytes (the rest), offset, stream }. */
  fill(value, { nbytes, offset = 0, stream } = {}) {
    const n = nbytes ?? this.nbytes - offset;
    checkCount(n, 'nbytes');
    const d = this._at(offset, n, 'fill');
    if (n === 0) return;
    if (stream) C.hpuMemsetAsync(stream.handle, d, value, n);
    else C.hpuMemset(d, value, n);
  }

  /** Returns the memory to the device's allocator (after work queued on it). Idempotent. */
  free() {
    if (!this._live) return;
    this._live = false;
    reaper.unregister(this);
    if (this._ptr !== 0n) C.hpuMemFree(this._ptr);
  }
}

/** Allocates `nbytes` on `device` (the current one by default). */
function memAlloc(nbytes, device) {
  return new DeviceMemory(nbytes, device);
}

module.exports = {
  HABANA_STATS_KEYS, ALLOCATOR_STATS_KEYS, memoryStats, memoryAllocated, maxMemoryAllocated,
  resetPeakMemoryStats, resetAccumulatedMemoryStats, memGetInfo, emptyCache, DeviceMemory, memAlloc, bytesOf,
};
