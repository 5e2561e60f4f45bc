'use strict';
// libhpu for Node.js: emulated Gaudi-style HPU devices over koffi, with the names
// of torch.hpu in camelCase. Every failing call throws an HpuError whose `status`
// is the number, `code` the C name and `message` libhpu's detail.

const native = require('./native');
const errors = require('./errors');
const device = require('./device');
const memory = require('./memory');
const stream = require('./stream');
const dtypes = require('./dtypes');
const autocast = require('./autocast');
const diagnostics = require('./diagnostics');
const tensor = require('./tensor');
const comm = require('./comm');
const ops = require('./ops');

/** libhpu's version, "major.minor.patch". */
function libraryVersion() {
  const v = native.versionNumber;
  return `${v >> 16}.${(v >> 8) & 0xff}.${v & 0xff}`;
}

module.exports = {
  version: require('../package.json').version,
  libraryPath: native.libraryPath,
  libraryVersion,
  Status: errors.Status,
  HpuError: errors.HpuError,
  Device: device.Device,
  deviceCount: device.deviceCount,
  isAvailable: device.isAvailable,
  currentDevice: device.currentDevice,
  setDevice: device.setDevice,
  withDevice: device.withDevice,
  getDeviceProperties: device.getDeviceProperties,
  getDeviceName: device.getDeviceName,
  synchronize: device.synchronize,
  HABANA_STATS_KEYS: memory.HABANA_STATS_KEYS,
  ALLOCATOR_STATS_KEYS: memory.ALLOCATOR_STATS_KEYS,
  memoryStats: memory.memoryStats,
  memoryAllocated: memory.memoryAllocated,
  maxMemoryAllocated: memory.maxMemoryAllocated,
  resetPeakMemoryStats: memory.resetPeakMemoryStats,
  resetAccumulatedMemoryStats: memory.resetAccumulatedMemoryStats,
  memGetInfo: memory.memGetInfo,
  emptyCache: memory.emptyCache,
  DeviceMemory: memory.DeviceMemory,
  memAlloc: memory.memAlloc,
  Stream: stream.Stream,
  Event: stream.Event,
  defaultStream: stream.defaultStream,
  withStream: stream.withStream,
  Tensor: tensor.Tensor,
  tensor: tensor.tensor,
  frombuffer: tensor.frombuffer,
  empty: tensor.empty,
  full: tensor.full,
  zeros: tensor.zeros,
  ones: tensor.ones,
  rand: tensor.rand,
  randn: tensor.randn,
  manualSeed: tensor.manualSeed,
  getRngState: tensor.getRngState,
  setRngState: tensor.setRngState,
  ops,
  mm: ops.mm,
  matmul: ops.matmul,
  linear: ops.linear,
  add: ops.add,
  sub: ops.sub,
  mul: ops.mul,
  div: ops.div,
  relu: ops.relu,
  gelu: ops.gelu,
  softmax: ops.softmax,
  crossEntropy: ops.crossEntropy,
  argmax: ops.argmax,
  ReduceOp: comm.ReduceOp,
  Comm: comm.Comm,
  getUniqueId: comm.getUniqueId,
  group: comm.group,
  DTYPES: dtypes.NAMES,
  AUTOCAST_LISTS: autocast.AUTOCAST_LISTS,
  autocast: autocast.autocast,
  isAutocastEnabled: autocast.isAutocastEnabled,
  getAutocastDtype: autocast.getAutocastDtype,
  getAutocastOpList: autocast.getAutocastOpList,
  setAutocastOpList: autocast.setAutocastOpList,
  autocastOpDtype: autocast.autocastOpDtype,
  LOG_LEVELS: diagnostics.LOG_LEVELS,
  setLogLevel: diagnostics.setLogLevel,
  getLogLevel: diagnostics.getLogLevel,
  setLogCallback: diagnostics.setLogCallback,
  logWrite: diagnostics.logWrite,
  profilerStart: diagnostics.profilerStart,
  profilerStop: diagnostics.profilerStop,
  profilerSummary: diagnostics.profilerSummary,
};
