'use strict';
// Tensors on devices, from typed arrays, arrays or raw bytes. bfloat16 and float16
// have no JavaScript array type: their values travel as Float32Array and libhpu
// converts on the device (round to nearest even); bytes() gives their raw bits.

const { koffi, C, abi, sized } = require('./native');
const { Status, HpuError, invalidArgument } = require('./errors');
const { resolve, deviceOfHandle } = require('./device');
const { DTYPES, dtypeInfo, dtypeName, dtypeOfArray } = require('./dtypes');
const { bytesOf } = require('./memory');

const MAX_DIMS = abi.CONSTANTS.HPU_TENSOR_MAX_DIMS;
// The largest ArrayBuffer koffi.view() makes; a larger one aborts the process.
const MAX_VIEW_BYTES = require('node:buffer').constants.MAX_LENGTH;


// Releases the handles of collected Tensors, and of collected hostView()
// buffers: each such ArrayBuffer holds a tensor handle of its own over the
// memory it shows (a libhpu view, which keeps the memory alive). The buffer is
// external memory that cannot be detached (a transfer to a worker copies it),
// so no array over the memory outlives that handle.
const reaper = new FinalizationRegistry((handle) => {
  try { C.hpuTensorRelease(handle); } catch { /* the process may be ending */ }
});

function checkShape(shape, name = 'shape') {
  if (!Array.isArray(shape) || shape.length > MAX_DIMS ||
      !shape.every((s) => Number.isSafeInteger(s) && s >= 0)) {
    throw invalidArgument(`${name} ${JSON.stringify(shape)} is not an array of at most ${MAX_DIMS} non-negative integers`);
  }
  return shape;
}

const numelOf = (shape) => shape.reduce((a, b) => a * b, 1);
const int64s = (values) => BigInt64Array.from(values.length ? values : [0], BigInt);

/** A tensor on an HPU device; make one with hpu.tensor(), hpu.empty(), ... or get one from an op. */
class Tensor {
  /** Takes ownership of an hpuTensor_t handle (released by release() or when collected). */
  constructor(handle) {
    this.handle = handle;
    const dtype = [0];
    const ndim = [0];
    const dims = new BigInt64Array(MAX_DIMS);
    const dev = [null];
    C.hpuTensorGetDtype(handle, dtype);
    C.hpuTensorGetShape(handle, ndim, dims);
    C.hpuTensorGetDevice(handle, dev);
    this.dtype = dtypeName(dtype[0]);
    this.shape = Array.from(dims.subarray(0, ndim[0]), Number);
    this.device = deviceOfHandle(dev[0]);
    this._live = true;
    reaper.register(this, handle, this);
  }

  get ndim() { return this.shape.length; }
  get numel() { return numelOf(this.shape); }
  get nbytes() { return this.numel * DTYPES[this.dtype].itemsize; }

  get strides() {
    const out = new BigInt64Array(MAX_DIMS);
    C.hpuTensorGetStrides(this.handle, out);
    return Array.from(out.subarray(0, this.ndim), Number);
  }

  isContiguous() {
    const out = [0];
    C.hpuTensorIsContiguous(this.handle, out);
    return out[0] !== 0;
  }

  /** Device address of element 0, a BigInt (0n for an empty tensor). */
  dataPtr() {
    const out = [null];
    C.hpuTensorGetData(this.handle, out);
    return out[0] ?? 0n;
  }

  /** Releases the handle now (memory goes back once views and queued work are done). Idempotent. */
  release() {
    if (!this._live) return;
    this._live = false;
    reaper.unregister(this);
    C.hpuTensorRelease(this.handle);
  }

  _stream() {
    return require('./stream').streamFor(this.device.index);
  }

  /**
   * The tensor's elements as a TypedArray over its memory, without a copy
   * (bfloat16 and float16: Uint16Array of their bits; bool: Uint8Array of 0/1).
   * First waits for the work queued on the tensor's device, so the array shows
   * what all ops queued so far have written (a copy to another device is
   * ordered on this device's stream too, see copyFrom). The array keeps the memory alive
   * until it (and every array over its buffer) is collected, even after
   * release(). The tensor must be contiguous.
   */
  hostView() {
    if (!this._live) throw new HpuError(Status.INVALID_HANDLE, `hostView: ${this} was released`);
    if (!this.isContiguous()) {
      throw invalidArgument(`hostView: ${this} has strides [${this.strides.join(', ')}], not contiguous; ` +
        'take the hostView() of its contiguous() copy');
    }
    if (this.nbytes > MAX_VIEW_BYTES) {
      throw new HpuError(Status.UNSUPPORTED, `hostView: ${this} has ${this.nbytes} bytes; an ArrayBuffer holds at ` +
        `most ${MAX_VIEW_BYTES} (buffer.constants.MAX_LENGTH): take the hostView() of slices along dim 0`);
    }
    this.device.synchronize();
    const HostArray = DTYPES[this.dtype].array;
    if (this.numel === 0) return new HostArray(0);
    const out = [null];
    C.hpuTensorWindow(out, this.handle, 0, 1, int64s([this.numel]));
    const window = out[0];
    let buffer;
    try {
      const data = [null];
      C.hpuTensorGetData(window, data);
      buffer = koffi.view(data[0], this.nbytes);
    } catch (e) {
      C.hpuTensorRelease(window);
      throw e;
    }
    reaper.register(buffer, window);
    return new HostArray(buffer);
  }

  // ---- host data ----------------------------------------------------------
  /** The elements' raw bytes, row-major (bfloat16 and float16: their bits). */
  bytes() {
    const out = Buffer.alloc(this.nbytes);
    if (out.length) C.hpuTensorCopyToHost(this._stream(), this.handle, out, out.length);
    return out;
  }

  /** The elements as a flat TypedArray (bfloat16 and float16 as Float32Array). */
  data() {
    const src = DTYPES[this.dtype].bits ? this.to('float32') : this;
    const array = new DTYPES[src.dtype].array(this.numel);
    const bytes = bytesOf(array, 'array');
    if (bytes.length) C.hpuTensorCopyToHost(this._stream(), src.handle, bytes, bytes.length);
    if (src !== this) src.release();
    return this.dtype === 'bool' ? Array.from(array, (v) => v !== 0) : array;
  }

  /** The elements as nested arrays (a number for a 0-dim tensor). */
  toList() {
    const flat = Array.from(this.data());
    const nest = (offset, dims) => {
      if (dims.length === 0) return flat[offset];
      const step = numelOf(dims.slice(1));
      return Array.from({ length: dims[0] }, (_, i) => nest(offset + i * step, dims.slice(1)));
    };
    return nest(0, this.shape);
  }

  /** The value of a one-element tensor. */
  item() {
    if (this.numel !== 1) throw invalidArgument(`item() needs one element; the tensor has shape [${this.shape}]`);
    return this.data()[0];
  }

  // ---- in place -----------------------------------------------------------
  fill(value) {
    C.hpuTensorFill(this._stream(), this.handle, Number(value));
    return this;
  }

  uniform(low = 0, high = 1) {
    C.hpuTensorFillUniform(this._stream(), this.handle, low, high);
    return this;
  }

  normal(mean = 0, std = 1) {
    C.hpuTensorFillNormal(this._stream(), this.handle, mean, std);
    return this;
  }

  /**
   * Copies `src` (a tensor of the same shape, any device and dtype) into this tensor.
   * Across devices the copy waits for the work queued on `src`'s device so far, and
   * work queued there later waits for the copy, as torch's does.
   */
  copyFrom(src) {
    if (!(src instanceof Tensor)) src = tensor(src, { device: this.device });
    if (src.shape.join() !== this.shape.join()) {
      throw invalidArgument(`copyFrom: src has shape [${src.shape}], this tensor [${this.shape}]`);
    }
    if (src.device.equals(this.device)) {
      C.hpuTensorCopy(this._stream(), this.handle, src.handle);
      return this;
    }
    // libhpu queues the copy on one stream, here this device's. As torch does, order it
    // after the work queued on the source's device and that work's later writes after it.
    const { currentStream } = require('./stream');
    const stream = currentStream(this.device);
    const srcStream = currentStream(src.device);
    stream.waitStream(srcStream);
    C.hpuTensorCopy(stream.handle, this.handle, src.handle);
    srcStream.waitStream(stream);
    return this;
  }

  // ---- conversions and views ------------------------------------------------
  /** This tensor in another dtype and/or on another device: to('bfloat16'), to({ device: 1 }). */
  to(target) {
    let options;
    if (typeof target === 'string' && target in DTYPES) options = { dtype: target };
    else if (target && target.constructor === Object) options = target;
    else options = { device: target };
    const dtype = options.dtype ?? this.dtype;
    dtypeInfo(dtype);
    const dev = resolve(options.device ?? this.device);
    if (dtype === this.dtype && dev.equals(this.device)) return this;
    return empty(this.shape, { dtype, device: dev }).copyFrom(this);
  }

  clone() {
    return empty(this.shape, { dtype: this.dtype, device: this.device }).copyFrom(this);
  }

  contiguous() {
    return this.isContiguous() ? this : this.clone();
  }

  /** Same elements in a new shape (one size may be -1). */
  reshape(shape) {
    if (!Array.isArray(shape) || shape.filter((s) => s === -1).length > 1) {
      throw invalidArgument(`shape ${JSON.stringify(shape)}: an array with at most one -1`);
    }
    checkShape(shape.filter((s) => s !== -1));
    const known = numelOf(shape.filter((s) => s !== -1));
    const fits = shape.includes(-1) ? known > 0 && this.numel % known === 0 : known === this.numel;
    if (!fits) throw invalidArgument(`shape [${shape}] does not fit ${this.numel} elements (shape [${this.shape}])`);
    const out = [null];
    C.hpuTensorReshape(out, this.contiguous().handle, shape.length, int64s(shape));
    return new Tensor(out[0]);
  }

  _dim(dim, name) {
    const n = Math.max(this.ndim, 1);
    if (!Number.isInteger(dim) || dim < -n || dim >= n) {
      throw invalidArgument(`${name} ${dim} is out of range for a tensor of ${this.ndim} dims`);
    }
    return (dim + n) % n;
  }

  transpose(dim0, dim1) {
    const out = [null];
    C.hpuTensorTranspose(out, this.handle, this._dim(dim0, 'dim0'), this._dim(dim1, 'dim1'));
    return new Tensor(out[0]);
  }

  /** Elements start, start + step, ... < end along `dim` (a view). */
  slice(dim, start = 0, end = undefined, step = 1) {
    const d = this._dim(dim, 'dim');
    const size = this.shape[d];
    const e = end === undefined ? size : end;
    if (!(Number.isInteger(start) && Number.isInteger(e) && Number.isInteger(step)) || start < 0 || e > size ||
        start > e || step < 1) {
      throw invalidArgument(`slice(${dim}, ${start}, ${e}, ${step}) does not fit dim ${d} of size ${size}`);
    }
    const out = [null];
    C.hpuTensorSlice(out, this.handle, d, start, e, step);
    return new Tensor(out[0]);
  }

  toString() {
    return `hpu.Tensor(shape=[${this.shape}], dtype=${this.dtype}, device=${this.device})`;
  }
}

/** A new contiguous tensor with unspecified contents. */
function empty(shape, { dtype = 'float32', device } = {}) {
  checkShape(shape);
  const out = [null];
  C.hpuTensorCreate(out, resolve(device).handle, dtypeInfo(dtype).value, shape.length, int64s(shape));
  return new Tensor(out[0]);
}

const full = (shape, value, options) => empty(shape, options).fill(value);
const zeros = (shape, options) => full(shape, 0, options);
const ones = (shape, options) => full(shape, 1, options);
const rand = (shape, options) => empty(shape, options).uniform();
const randn = (shape, options) => empty(shape, options).normal();

function fromHost(bytes, hostDtype, shape, dtype, device) {
  const need = numelOf(shape) * DTYPES[hostDtype].itemsize;
  if (bytes.byteLength !== need) {
    throw invalidArgument(`data has ${bytes.byteLength} bytes; shape [${shape}] of ${hostDtype} needs ${need}`);
  }
  const out = [null];
  C.hpuTensorCreateFromHost(out, resolve(device).handle, DTYPES[hostDtype].value, shape.length, int64s(shape),
    bytes.byteLength ? bytes : null);
  const t = new Tensor(out[0]);
  if (hostDtype === dtype) return t;
  const converted = t.to(dtype);
  t.release();
  return converted;
}

function flatten(data) {
  const shape = [];
  for (let probe = data; Array.isArray(probe); probe = probe[0]) {
    shape.push(probe.length);
    if (probe.length === 0) break;
  }
  const flat = [];
  const walk = (v, depth) => {
    if (depth === shape.length) {
      if (Array.isArray(v)) throw invalidArgument(`data is ragged: an array where a number belongs at depth ${depth}`);
      flat.push(v);
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[depth]) {
      throw invalidArgument(`data is ragged: expected ${shape[depth]} entries at depth ${depth}`);
    }
    v.forEach((x) => walk(x, depth + 1));
  };
  walk(data, 0);
  return { flat, shape };
}

/**
 * A new tensor from a TypedArray (its dtype, shape [length] unless options.shape),
 * nested arrays of numbers (float32 unless options.dtype; booleans: bool; bigints:
 * int64) or a number. options: { dtype, shape, device }.
 */
function tensor(data, { dtype, shape, device } = {}) {
  if (data instanceof Tensor) return data.to({ dtype: dtype ?? data.dtype, device: device ?? data.device }).clone();
  if (ArrayBuffer.isView(data) && !(data instanceof DataView)) {
    const host = dtypeOfArray(data);
    if (!host) throw invalidArgument(`a ${data.constructor.name} has no dtype: use hpu.frombuffer(data, dtype, shape)`);
    const dims = checkShape(shape ?? [data.length]);
    return fromHost(bytesOf(data, 'data'), host, dims, dtype ?? host, device);
  }
  const { flat, shape: inferred } = flatten(Array.isArray(data) ? data : [data]);
  const dims = Array.isArray(data) ? inferred : [];
  let kind = 'float32';
  if (flat.length && flat.every((x) => typeof x === 'boolean')) kind = 'bool';
  else if (flat.length && flat.every((x) => typeof x === 'bigint')) kind = 'int64';
  else if (!flat.every((x) => typeof x === 'number')) throw new TypeError('data must hold numbers, booleans or bigints');
  const target = dtype ?? kind;
  const info = dtypeInfo(target);
  const host = info.bits ? 'float32' : target;
  const HostArray = DTYPES[host].array;
  const values = host === 'bool' ? flat.map((x) => (x ? 1 : 0))
    : HostArray === BigInt64Array || HostArray === BigUint64Array ? flat.map(BigInt) : flat.map(Number);
  return fromHost(bytesOf(HostArray.from(values), 'data'), host, checkShape(shape ?? dims), target, device);
}

/** A tensor of the raw bytes of `data` read as `dtype` (bfloat16: raw bits), 1-dim or of `shape`. */
function frombuffer(data, dtype, shape, { device } = {}) {
  const bytes = bytesOf(data, 'data');
  const info = dtypeInfo(dtype);
  return fromHost(bytes, dtype, checkShape(shape ?? [Math.floor(bytes.byteLength / info.itemsize)]), dtype, device);
}

function manualSeed(seed, device) {
  C.hpuRandomSeed(resolve(device).handle, BigInt(seed));
}

/** { seed, offset } of a device's generator. */
function getRngState(device) {
  const s = sized('hpuRandomState_t');
  C.hpuRandomGetState(resolve(device).handle, s);
  return { seed: s.seed, offset: s.offset };
}

function setRngState({ seed, offset }, device) {
  C.hpuRandomSetState(resolve(device).handle, { ...sized('hpuRandomState_t'), seed, offset });
}

module.exports = {
  MAX_DIMS, Tensor, tensor, frombuffer, empty, full, zeros, ones, rand, randn, manualSeed, getRngState, setRngState,
};
