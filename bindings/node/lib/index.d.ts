// Type declarations of the hpu Node.js binding (libhpu over koffi). The C layer's
// (statuses, constants, structs, the functions native.js declares) are generated into
// abi.d.ts by tools/abi/gen_bindings.py.

import type { Status as AbiStatus } from './abi';

/** libhpu's statuses (hpuStatus_t), generated from the headers into abi.d.ts. */
export declare const Status: typeof AbiStatus;

/** A failed libhpu call: `status` is the number, `code` its C name, `message` libhpu's detail. */
export declare class HpuError extends Error {
  constructor(status: number, message: string);
  readonly status: number;
  /** "HPU_ERROR_NOT_FOUND", ... */
  readonly code: string;
  readonly statusName: string;
}

/** A device argument: an index, "hpu" / "hpu:<index>", a Device, or undefined (the current one). */
export type DeviceLike = Device | number | string | undefined | null;

export interface DeviceProperties {
  name: string;
  profile: string;
  totalMemory: number;
  memoryLimit: number;
  ordinal: number;
  moduleId: number;
  /** The instruction set the kernels use: "amx", "avx512", "avx2" or "scalar". */
  kernelIsa: string;
}

export declare class Device {
  constructor(device?: DeviceLike);
  readonly index: number;
  /** The hpuDevice_t handle. */
  readonly handle: bigint;
  readonly properties: DeviceProperties;
  readonly name: string;
  synchronize(): void;
  equals(other: unknown): boolean;
}

export declare const version: string;
export declare const libraryPath: string;
export declare function libraryVersion(): string;

export declare function deviceCount(): number;
export declare function isAvailable(): boolean;
export declare function currentDevice(): number;
export declare function setDevice(device: DeviceLike): void;
/** Runs fn with `device` as the current device (across fn's awaits too) and returns its result. */
export declare function withDevice<T>(device: DeviceLike, fn: (device: Device) => T): T;
export declare function getDeviceProperties(device?: DeviceLike): DeviceProperties;
export declare function getDeviceName(device?: DeviceLike): string;
export declare function synchronize(device?: DeviceLike): void;

/** Habana's ten keys, then the allocator's three. */
export interface MemoryStats {
  Limit: number; InUse: number; MaxInUse: number; NumAllocs: number; NumFrees: number;
  ActiveAllocs: number; MaxAllocSize: number; TotalSystemAllocs: number; TotalSystemFrees: number;
  TotalActiveAllocs: number; ReservedBytes: number; SegmentAllocs: number; SegmentFrees: number;
}
export declare const HABANA_STATS_KEYS: readonly string[];
export declare const ALLOCATOR_STATS_KEYS: readonly string[];
export declare function memoryStats(device?: DeviceLike): MemoryStats;
export declare function memoryAllocated(device?: DeviceLike): number;
export declare function maxMemoryAllocated(device?: DeviceLike): number;
export declare function resetPeakMemoryStats(device?: DeviceLike): void;
export declare function resetAccumulatedMemoryStats(device?: DeviceLike): void;
export declare function memGetInfo(device?: DeviceLike): { free: number; total: number };
export declare function emptyCache(device?: DeviceLike): void;

/** Host data: its bytes are read or written in place. */
export type HostData = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

export declare class DeviceMemory {
  constructor(nbytes: number, device?: DeviceLike);
  readonly device: Device;
  readonly nbytes: number;
  readonly ptr: bigint;
  copyFromHost(data: HostData, offset?: number): void;
  copyRowsFromHost(data: HostData, rowBytes: number, rows: readonly number[], offset?: number): void;
  copyToHost<T extends HostData = Buffer>(target?: T, offset?: number): T;
  copyFrom(src: DeviceMemory, options?: { nbytes?: number; offset?: number; srcOffset?: number; stream?: Stream }): void;
  fill(value: number, options?: { nbytes?: number; offset?: number; stream?: Stream }): void;
  free(): void;
}
export declare function memAlloc(nbytes: number, device?: DeviceLike): DeviceMemory;

export declare class Stream {
  constructor(device?: DeviceLike);
  readonly device: Device;
  readonly handle: bigint;
  synchronize(): void;
  query(): boolean;
  waitEvent(event: Event): void;
  waitStream(other: Stream): void;
  recordEvent(event?: Event): Event;
  close(): void;
  equals(other: unknown): boolean;
}

export declare class Event {
  constructor();
  readonly handle: bigint;
  record(stream?: Stream): void;
  synchronize(): void;
  query(): boolean;
  elapsedTime(end: Event): number;
  close(): void;
}
export declare function defaultStream(device?: DeviceLike): Stream;

/** Data type names: 'bool', 'uint8', 'int8', 'int32', 'uint32', 'int64', 'uint64', 'float16', 'bfloat16', 'float32', 'float64'. */
export type DType = 'bool' | 'uint8' | 'int8' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'float16' | 'bfloat16'
  | 'float32' | 'float64';
export declare const DTYPES: readonly DType[];

export type AutocastList = 'lower_precision' | 'fp32' | 'promote';
export declare const AUTOCAST_LISTS: readonly AutocastList[];
/**
 * Runs fn under an autocast region (dtype 'bfloat16' by default) and returns its result.
 * The region follows fn's awaits and never leaks to other tasks.
 */
export declare function autocast<T>(fn: () => T): T;
export declare function autocast<T>(options: { dtype?: 'bfloat16' | 'float16'; enabled?: boolean }, fn: () => T): T;
export declare function isAutocastEnabled(): boolean;
export declare function getAutocastDtype(): DType;
export declare function getAutocastOpList(which: AutocastList): string[];
export declare function setAutocastOpList(which: AutocastList, ops: string[]): void;
/** The dtype the first tensor input of `op` would run in now, given its inputs' dtypes. */
export declare function autocastOpDtype(op: string, ...inputDtypes: DType[]): DType;

export type LogLevel = 'off' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
export declare const LOG_LEVELS: readonly LogLevel[];
export declare function setLogLevel(level: LogLevel): void;
export declare function getLogLevel(): LogLevel;
export interface LogRecord {
  level: LogLevel; component: string; message: string; time: string; pid: number;
  rank: number | null; device: number | null; line: string;
}
/** Delivers libhpu's log lines (of every thread) to fn on the main thread; null restores the default. */
export declare function setLogCallback(fn: ((level: LogLevel, line: string, record: LogRecord) => void) | null): void;
/** Writes a line through libhpu's logging (component 'node' by default). */
export declare function logWrite(level: Exclude<LogLevel, 'off'>, message: string, component?: string): void;
export declare function profilerStart(path: string): void;
export declare function profilerStop(): void;
export declare function profilerSummary(): string;

/** Runs fn with `stream` as the queue for work on its device (across fn's awaits too). */
export declare function withStream<T>(stream: Stream, fn: (stream: Stream) => T): T;

export interface TensorOptions { dtype?: DType; device?: DeviceLike }

export declare class Tensor {
  readonly handle: bigint;
  readonly dtype: DType;
  readonly shape: number[];
  readonly device: Device;
  readonly ndim: number;
  readonly numel: number;
  readonly nbytes: number;
  readonly strides: number[];
  isContiguous(): boolean;
  dataPtr(): bigint;
  release(): void;
  /** Raw bytes, row-major (bfloat16 / float16: their bits). */
  bytes(): Buffer;
  /** Flat elements (bfloat16 / float16 as Float32Array; bool as boolean[]). */
  data(): ArrayBufferView | boolean[];
  /**
   * The flat elements as a TypedArray over the tensor's memory, no copy:
   * writes through it are the tensor's. Float32Array, Float64Array,
   * Int32Array, Uint32Array, Int8Array, Uint8Array (uint8; bool as 0/1),
   * BigInt64Array, BigUint64Array; bfloat16 and float16 as Uint16Array of
   * their bits. Waits first for the work queued on the tensor's device (a copy
   * to another device included; throwing its sticky stream error); work queued afterwards is not
   * ordered with the array: synchronize() before using it again. The array
   * keeps the memory alive until its buffer is collected, even after
   * release(). Throws HPU_ERROR_INVALID_HANDLE for a released tensor and
   * HPU_ERROR_INVALID_ARGUMENT for a non-contiguous one, HPU_ERROR_UNSUPPORTED
   * past buffer.constants.MAX_LENGTH bytes. An empty tensor gives an empty
   * array of its own.
   */
  hostView(): Float32Array | Float64Array | Int32Array | Uint32Array | Int8Array | Uint8Array | Uint16Array |
    BigInt64Array | BigUint64Array;
  toList(): unknown;
  item(): number | bigint | boolean;
  fill(value: number): this;
  uniform(low?: number, high?: number): this;
  normal(mean?: number, std?: number): this;
  /** Across devices the copy waits for the work queued on src's device, and later work there waits for it. */
  copyFrom(src: Tensor | ArrayBufferView | unknown[]): this;
  to(target: DType | DeviceLike | TensorOptions): Tensor;
  clone(): Tensor;
  contiguous(): Tensor;
  reshape(shape: number[]): Tensor;
  transpose(dim0: number, dim1: number): Tensor;
  slice(dim: number, start?: number, end?: number, step?: number): Tensor;
}
export declare function tensor(data: ArrayBufferView | unknown[] | number | boolean | bigint | Tensor,
  options?: TensorOptions & { shape?: number[] }): Tensor;
export declare function frombuffer(data: HostData, dtype: DType, shape?: number[], options?: { device?: DeviceLike }): Tensor;
export declare function empty(shape: number[], options?: TensorOptions): Tensor;
export declare function full(shape: number[], value: number, options?: TensorOptions): Tensor;
export declare function zeros(shape: number[], options?: TensorOptions): Tensor;
export declare function ones(shape: number[], options?: TensorOptions): Tensor;
export declare function rand(shape: number[], options?: TensorOptions): Tensor;
export declare function randn(shape: number[], options?: TensorOptions): Tensor;
export declare function manualSeed(seed: number | bigint, device?: DeviceLike): void;
export declare function getRngState(device?: DeviceLike): { seed: number | bigint; offset: number | bigint };
export declare function setRngState(state: { seed: number | bigint; offset: number | bigint }, device?: DeviceLike): void;

export declare const ReduceOp: Readonly<{ SUM: 0; PRODUCT: 1; MIN: 2; MAX: 3; AVG: 4 }>;
export type ReduceOpLike = number | 'sum' | 'product' | 'prod' | 'min' | 'max' | 'avg' | 'mean';
export declare function getUniqueId(): Buffer;
/** Runs fn with its collectives and sends/receives issued together at the end. */
export declare function group<T>(fn: () => T): T;
export declare class Comm {
  static initAll(devices?: DeviceLike[]): Comm[];
  /** This process's ranks in the job its launcher (torchrun, mpirun, srun, HPU_*) describes; blocks until all joined. */
  static fromEnv(devices?: DeviceLike[]): Comm[];
  static initRank(device: DeviceLike, worldSize: number, uniqueId: Buffer, rank: number): Promise<Comm>;
  readonly handle: bigint;
  readonly device: Device;
  readonly rank: number;
  readonly worldSize: number;
  timeout: number;
  allReduce(tensor: Tensor, op?: ReduceOpLike): Tensor;
  broadcast(tensor: Tensor, src?: number): Tensor;
  reduce(tensor: Tensor, dst?: number, op?: ReduceOpLike): Tensor;
  allGatherIntoTensor(output: Tensor, input: Tensor): Tensor;
  allGather(tensorList: Tensor[], tensor: Tensor): Tensor[];
  reduceScatterTensor(output: Tensor, input: Tensor, op?: ReduceOpLike): Tensor;
  allToAllSingle(output: Tensor, input: Tensor): Tensor;
  barrier(): void;
  send(tensor: Tensor, dst: number): void;
  recv(tensor: Tensor, src: number): Tensor;
  synchronize(): void;
  getAsyncError(): HpuError | null;
  abort(): void;
  destroy(): void;
}

type Out = Tensor;
/** The ops, with their backward (`hpu.ops.mmBackward`, ...) and the fused optimizer steps. */
export declare const ops: {
  mm(a: Tensor, b: Tensor): Out; mmBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  bmm(a: Tensor, b: Tensor): Out; bmmBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  matmul(a: Tensor, b: Tensor): Out; matmulBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  addmm(bias: Tensor, a: Tensor, b: Tensor, options?: { beta?: number; alpha?: number }): Out;
  addmmBackward(g: Tensor, bias: Tensor, a: Tensor, b: Tensor, options?: { beta?: number; alpha?: number }): [Out, Out, Out];
  linear(x: Tensor, w: Tensor, bias?: Tensor | null): Out;
  linearBackward(g: Tensor, x: Tensor, w: Tensor, bias?: boolean): [Out, Out, Out | null];
  add(a: Tensor | number, b: Tensor | number): Out; addBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  sub(a: Tensor | number, b: Tensor | number): Out; subBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  mul(a: Tensor | number, b: Tensor | number): Out; mulBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  div(a: Tensor | number, b: Tensor | number): Out; divBackward(g: Tensor, a: Tensor, b: Tensor): [Out, Out];
  addInplace(dst: Tensor, src: Tensor, alpha?: number): Tensor;
  exp(x: Tensor): Out; log(x: Tensor): Out; tan(x: Tensor): Out; relu(x: Tensor): Out; gelu(x: Tensor): Out;
  tanh(x: Tensor): Out; sigmoid(x: Tensor): Out;
  expBackward(g: Tensor, x: Tensor): Out; logBackward(g: Tensor, x: Tensor): Out; tanBackward(g: Tensor, x: Tensor): Out;
  reluBackward(g: Tensor, x: Tensor): Out; geluBackward(g: Tensor, x: Tensor): Out; tanhBackward(g: Tensor, x: Tensor): Out;
  sigmoidBackward(g: Tensor, x: Tensor): Out;
  softmax(x: Tensor, dim?: number): Out; softmaxBackward(g: Tensor, out: Tensor, dim?: number, inputDtype?: DType): Out;
  logSoftmax(x: Tensor, dim?: number): Out; logSoftmaxBackward(g: Tensor, out: Tensor, dim?: number, inputDtype?: DType): Out;
  nllLoss(input: Tensor, target: Tensor, options?: LossOptions): Out;
  nllLossBackward(g: Tensor, input: Tensor, target: Tensor, options?: LossOptions): Out;
  /** target: class indices (int32/int64, input's shape without the class dim) or class probabilities (floating, input's shape). */
  crossEntropy(input: Tensor, target: Tensor, options?: CrossEntropyOptions): Out;
  crossEntropyBackward(g: Tensor, input: Tensor, target: Tensor, options?: CrossEntropyOptions): Out;
  /** Over the last dim, or the trailing dims normalizedShape names (x's shape from some dim on). */
  layerNorm(x: Tensor, options?: { weight?: Tensor | null; bias?: Tensor | null; eps?: number; returnStats?: boolean; normalizedShape?: number | number[] | null }): Out | [Out, Out, Out];
  layerNormBackward(g: Tensor, x: Tensor, mean: Tensor, rstd: Tensor, weight?: Tensor | null): [Out, Out | null, Out | null];
  dropout(x: Tensor, options?: { p?: number; training?: boolean; returnMask?: boolean }): Out | [Out, Out];
  dropoutBackward(g: Tensor, mask: Tensor, p: number, inputDtype?: DType): Out;
  embedding(indices: Tensor, weight: Tensor, paddingIdx?: number): Out;
  embeddingBackward(g: Tensor, indices: Tensor, weight: Tensor, paddingIdx?: number): Out;
  sum(x: Tensor, options?: ReduceOptions): Out; sumBackward(g: Tensor, x: Tensor, options?: ReduceOptions): Out;
  mean(x: Tensor, options?: ReduceOptions): Out; meanBackward(g: Tensor, x: Tensor, options?: ReduceOptions): Out;
  /** int64 index of the largest element along dim (of the flattened tensor when dim is null), the first on ties. */
  argmax(x: Tensor, options?: { dim?: number | null; keepdim?: boolean }): Out;
  /** Sum of x**2 over every element of the tensors: a float32 0-dim tensor. */
  squaredNorm(tensors: Tensor | Tensor[]): Out;
  scaleInplace(x: Tensor, alpha: number): Tensor;
  cast(x: Tensor, dtype: DType): Out; castBackward(g: Tensor, x: Tensor): Out;
  sgdStep(param: Tensor, grad: Tensor, momentumBuffer: Tensor | null, options: { step: number; lr?: number;
    momentum?: number; dampening?: number; weightDecay?: number; nesterov?: boolean }): void;
  adamwStep(param: Tensor, grad: Tensor, expAvg: Tensor, expAvgSq: Tensor, options: { step: number; lr?: number;
    betas?: [number, number]; eps?: number; weightDecay?: number; paramCopy?: Tensor | null }): void;
};
/**
 * input [C], [N, C] or [N, C, d1, ...], target its shape without the class dim. weight: class weights [C]
 * (floating); each sample's loss is scaled by its class's weight and 'mean' divides by their sum.
 */
export interface LossOptions { reduction?: 'none' | 'mean' | 'sum'; ignoreIndex?: number; weight?: Tensor | null }
/** labelSmoothing e in [0, 1]: e / C of every class's loss mixed in, as torch does. */
export interface CrossEntropyOptions extends LossOptions { labelSmoothing?: number }
export interface ReduceOptions { dim?: number | number[]; keepdim?: boolean }
export declare const mm: typeof ops.mm, matmul: typeof ops.matmul, linear: typeof ops.linear, add: typeof ops.add,
  sub: typeof ops.sub, mul: typeof ops.mul, div: typeof ops.div, relu: typeof ops.relu, gelu: typeof ops.gelu,
  softmax: typeof ops.softmax, crossEntropy: typeof ops.crossEntropy, argmax: typeof ops.argmax;
