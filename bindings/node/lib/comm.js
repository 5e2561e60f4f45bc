'use strict';
// Collectives between devices, with torch.distributed's names in camelCase. A
// Comm is one rank of a group, bound to one device; collectives work in place on
// that device's tensors and are queued on its stream (withStream, else the
// default stream), so later reads of the tensors see the result.

const native = require('./native');

const { C, abi, raw, getLastErrorMessage } = native;
const { HpuError, invalidArgument, statusName } = require('./errors');
const { resolve, deviceCount } = require('./device');
const { streamFor } = require('./stream');
const { DTYPES } = require('./dtypes');
const { Tensor, empty } = require('./tensor');

const UNIQUE_ID_BYTES = abi.CONSTANTS.HPU_UNIQUE_ID_BYTES;
// Joining blocks until every rank has joined: it runs on a worker thread (koffi's async call).
const initRankRaw = raw('hpuCommInitRank');

/** Reduction operations (hpuRedOp_t), named as torch.distributed.ReduceOp. */
const { HPU_SUM, HPU_PROD, HPU_MIN, HPU_MAX, HPU_AVG } = abi.ENUMS.hpuRedOp_t;
const ReduceOp = Object.freeze({ SUM: HPU_SUM, PRODUCT: HPU_PROD, MIN: HPU_MIN, MAX: HPU_MAX, AVG: HPU_AVG });
const OP_NAMES = { sum: HPU_SUM, product: HPU_PROD, prod: HPU_PROD, min: HPU_MIN, max: HPU_MAX, avg: HPU_AVG, mean: HPU_AVG };

function opOf(op) {
  if (typeof op === 'string' && op.toLowerCase() in OP_NAMES) return OP_NAMES[op.toLowerCase()];
  if (Object.values(ReduceOp).includes(op)) return op;
  throw invalidArgument(`op ${JSON.stringify(op)} is not one of sum, product, min, max, avg`);
}

/** A new rendezvous token (128 bytes with a fresh random secret) for Comm.initRank. */
function getUniqueId() {
  const id = Buffer.alloc(UNIQUE_ID_BYTES); // hpuUniqueId_t's bytes (koffi would read its char array as a string)
  C.hpuGetUniqueId(id);
  return id;
}

const reaper = new FinalizationRegistry((handle) => {
  try { C.hpuCommDestroy(handle); } catch { /* the process may be ending */ }
});

/** One rank of a communicator group. */
class Comm {
  constructor(handle, device) {
    this.handle = handle;
    this.device = device;
    const n = [0];
    const r = [0];
    C.hpuCommCount(handle, n);
    C.hpuCommUserRank(handle, r);
    this.worldSize = n[0];
    this.rank = r[0];
    this._live = true;
    reaper.register(this, handle, this);
  }

  /** A whole group in this process: rank i on devices[i] (every visible device by default). */
  static initAll(devices) {
    return Comm._initDevices('initAll', C.hpuCommInitAll, devices);
  }

  /**
   * This process's ranks in the job its launcher describes (torchrun/Lightning's
   * MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK or NODE_RANK; Open MPI's
   * OMPI_COMM_WORLD_*; Slurm's SLURM_*; HPU_* variables win): with P processes
   * of devices.length devices each, launch rank p hosts ranks
   * p * devices.length + i. WORLD_SIZE counts ranks, as in torchrun and
   * Lightning (P * devices.length); the other counts are processes. Without a
   * launcher it is initAll. Blocks until every
   * rank of the job has joined (one call per process joins all its ranks), so a
   * failure carries libhpu's message, e.g. the launcher variable that is missing.
   */
  static fromEnv(devices) {
    return Comm._initDevices('fromEnv', C.hpuCommInitFromEnv, devices);
  }

  static _initDevices(what, init, devices) {
    const devs = (devices ?? Array.from({ length: deviceCount() }, (_, i) => i)).map(resolve);
    if (devs.length === 0) throw invalidArgument(`${what}: no devices`);
    if (new Set(devs.map((d) => d.index)).size !== devs.length) {
      throw invalidArgument(`${what}: devices [${devs.map((d) => d.index)}] repeat one`);
    }
    const out = new Array(devs.length).fill(null);
    init(out, devs.length, devs.map((d) => d.handle));
    return out.map((h, i) => new Comm(h, devs[i]));
  }

  /**
   * Joins rank `rank` of the group named by `uniqueId`; resolves once all
   * `worldSize` ranks have joined (the wait runs off the main thread, so one
   * process may join several ranks with Promise.all).
   */
  static initRank(device, worldSize, uniqueId, rank) {
    if (!Buffer.isBuffer(uniqueId) || uniqueId.length !== UNIQUE_ID_BYTES) {
      return Promise.reject(invalidArgument(`uniqueId must be the ${UNIQUE_ID_BYTES} bytes getUniqueId() returns`));
    }
    const dev = resolve(device);
    const out = [null];
    return new Promise((ok, fail) => {
      initRankRaw.async(out, dev.handle, worldSize, uniqueId, rank, (err, status) => {
        if (err) fail(err);
        // libhpu's message is thread-local to the worker that made the call: say what we know.
        else if (status !== 0) fail(new HpuError(status, `hpuCommInitRank: rank ${rank} of ${worldSize} on ${dev} failed with ${statusName(status)}`));
        else ok(new Comm(out[0], dev));
      });
    });
  }

  get timeout() {
    const out = [0];
    C.hpuCommGetTimeout(this.handle, out);
    return out[0];
  }

  set timeout(seconds) {
    C.hpuCommSetTimeout(this.handle, seconds);
  }

  _tensor(op, name, t) {
    if (!(t instanceof Tensor)) throw new TypeError(`${op}: ${name} must be an hpu.Tensor`);
    if (!t.device.equals(this.device)) {
      throw invalidArgument(`${op}: ${name} is on ${t.device}; rank ${this.rank} works on ${this.device}`);
    }
    if (!t.isContiguous()) throw invalidArgument(`${op}: ${name} (shape [${t.shape}]) is not contiguous`);
    return t;
  }

  _pair(op, out, inp, outNumel) {
    this._tensor(op, 'output', out);
    this._tensor(op, 'input', inp);
    if (out.dtype !== inp.dtype) throw invalidArgument(`${op}: output is ${out.dtype} but input ${inp.dtype}`);
    if (out.numel !== outNumel) {
      throw invalidArgument(`${op}: output has ${out.numel} elements; ${outNumel} are needed`);
    }
  }

  _stream() {
    return streamFor(this.device.index);
  }

  /** tensor = op over all ranks of tensor, in place. */
  allReduce(tensor, op = 'sum') {
    const p = this._tensor('allReduce', 'tensor', tensor).dataPtr();
    C.hpuAllreduce(this._stream(), this.handle, p, p, tensor.numel, DTYPES[tensor.dtype].value, opOf(op));
    return tensor;
  }

  /** tensor = rank `src`'s tensor, on every rank. */
  broadcast(tensor, src = 0) {
    const p = this._tensor('broadcast', 'tensor', tensor).dataPtr();
    C.hpuBroadcast(this._stream(), this.handle, p, p, tensor.numel, DTYPES[tensor.dtype].value, src);
    return tensor;
  }

  /** On rank `dst`: tensor = op over all ranks of tensor. */
  reduce(tensor, dst = 0, op = 'sum') {
    const p = this._tensor('reduce', 'tensor', tensor).dataPtr();
    C.hpuReduce(this._stream(), this.handle, p, p, tensor.numel, DTYPES[tensor.dtype].value, opOf(op), dst);
    return tensor;
  }

  /** output = the inputs of all ranks, concatenated. */
  allGatherIntoTensor(output, input) {
    this._pair('allGatherIntoTensor', output, input, input.numel * this.worldSize);
    C.hpuAllgather(this._stream(), this.handle, input.dataPtr(), output.dataPtr(), input.numel,
      DTYPES[input.dtype].value);
    return output;
  }

  /** tensorList[r] = rank r's tensor. */
  allGather(tensorList, tensor) {
    if (tensorList.length !== this.worldSize) {
      throw invalidArgument(`allGather: tensorList has ${tensorList.length} tensors; worldSize is ${this.worldSize}`);
    }
    const n = tensor.numel;
    const gathered = empty([this.worldSize * n], { dtype: tensor.dtype, device: this.device });
    this.allGatherIntoTensor(gathered, tensor);
    tensorList.forEach((out, r) => {
      const part = gathered.slice(0, r * n, (r + 1) * n);
      const shaped = part.reshape(out.shape);
      this._tensor('allGather', `tensorList[${r}]`, out).copyFrom(shaped);
      shaped.release();
      part.release();
    });
    gathered.release();
    return tensorList;
  }

  /** output = op over all ranks of this rank's block of input. */
  reduceScatterTensor(output, input, op = 'sum') {
    if (input.numel % this.worldSize) {
      throw invalidArgument(`reduceScatterTensor: input has ${input.numel} elements, not a multiple of worldSize ${this.worldSize}`);
    }
    this._pair('reduceScatterTensor', output, input, input.numel / this.worldSize);
    C.hpuReduceScatter(this._stream(), this.handle, input.dataPtr(), output.dataPtr(), output.numel,
      DTYPES[input.dtype].value, opOf(op));
    return output;
  }

  /** Block r of output = block `rank` of rank r's input. */
  allToAllSingle(output, input) {
    if (input.numel % this.worldSize) {
      throw invalidArgument(`allToAllSingle: input has ${input.numel} elements, not a multiple of worldSize ${this.worldSize}`);
    }
    this._pair('allToAllSingle', output, input, input.numel);
    C.hpuAlltoall(this._stream(), this.handle, input.dataPtr(), output.dataPtr(), input.numel / this.worldSize,
      DTYPES[input.dtype].value);
    return output;
  }

  barrier() {
    C.hpuBarrier(this._stream(), this.handle);
  }

  /** Sends tensor to rank `dst` (exchanges go inside hpu.group()). */
  send(tensor, dst) {
    this._tensor('send', 'tensor', tensor);
    C.hpuSend(this._stream(), this.handle, tensor.dataPtr(), tensor.numel, DTYPES[tensor.dtype].value, dst);
  }

  recv(tensor, src) {
    this._tensor('recv', 'tensor', tensor);
    C.hpuRecv(this._stream(), this.handle, tensor.dataPtr(), tensor.numel, DTYPES[tensor.dtype].value, src);
    return tensor;
  }

  /** Waits for the work queued on this rank's stream; throws a collective's error. */
  synchronize() {
    const s = this._stream();
    if (s === null) this.device.synchronize();
    else native.C.hpuStreamSynchronize(s);
  }

  /** The sticky error as an HpuError, or null. */
  getAsyncError() {
    const status = [0];
    C.hpuCommGetAsyncError(this.handle, status);
    return status[0] ? new HpuError(status[0], getLastErrorMessage()) : null;
  }

  abort() {
    C.hpuCommAbort(this.handle);
  }

  /** Waits for queued operations, then releases the communicator. Idempotent. */
  destroy() {
    if (!this._live) return;
    this._live = false;
    reaper.unregister(this);
    C.hpuCommDestroy(this.handle);
  }
}

/** Runs fn() with its collectives and sends/receives issued together at the end (hpuGroupStart/End). */
function group(fn) {
  C.hpuGroupStart();
  try {
    return fn();
  } finally {
    C.hpuGroupEnd();
  }
}

module.exports = { UNIQUE_ID_BYTES, ReduceOp, getUniqueId, Comm, group };
