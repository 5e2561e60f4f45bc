'use strict';
// Data types (hpuDataType_t) by name, and the typed arrays that hold them.

const { invalidArgument } = require('./errors');
const { ENUMS: { hpuDataType_t: T } } = require('./abi');

/** name: { value (hpuDataType_t), itemsize, array (the TypedArray of its elements, or of its raw bits) } */
const DTYPES = Object.freeze({
  bool: { value: T.HPU_BOOL, itemsize: 1, array: Uint8Array },
  uint8: { value: T.HPU_UINT8, itemsize: 1, array: Uint8Array },
  int8: { value: T.HPU_INT8, itemsize: 1, array: Int8Array },
  int32: { value: T.HPU_INT32, itemsize: 4, array: Int32Array },
  uint32: { value: T.HPU_UINT32, itemsize: 4, array: Uint32Array },
  int64: { value: T.HPU_INT64, itemsize: 8, array: BigInt64Array },
  uint64: { value: T.HPU_UINT64, itemsize: 8, array: BigUint64Array },
  float16: { value: T.HPU_FLOAT16, itemsize: 2, array: Uint16Array, floating: true, bits: true },
  bfloat16: { value: T.HPU_BFLOAT16, itemsize: 2, array: Uint16Array, floating: true, bits: true },
  float32: { value: T.HPU_FLOAT32, itemsize: 4, array: Float32Array, floating: true },
  float64: { value: T.HPU_FLOAT64, itemsize: 8, array: Float64Array, floating: true },
});
const NAMES = Object.keys(DTYPES);

/** A dtype name checked against the list ("float32", "bfloat16", ...). */
function dtypeInfo(name) {
  const info = typeof name === 'string' ? DTYPES[name] : undefined;
  if (!info) throw invalidArgument(`dtype ${JSON.stringify(name)} is not one of ${NAMES.join(', ')}`);
  return info;
}

const BY_VALUE = new Map(NAMES.map((name) => [DTYPES[name].value, name]));

/** The dtype name of an hpuDataType_t number. */
function dtypeName(value) {
  return BY_VALUE.get(value);
}

/** The dtype a TypedArray holds (Uint16Array: none, its bits are ambiguous). */
function dtypeOfArray(array) {
  switch (array.constructor) {
    case Float32Array: return 'float32';
    case Float64Array: return 'float64';
    case Int32Array: return 'int32';
    case Uint32Array: return 'uint32';
    case BigInt64Array: return 'int64';
    case BigUint64Array: return 'uint64';
    case Int8Array: return 'int8';
    case Uint8Array: case Buffer: return 'uint8';
    default: return undefined;
  }
}

module.exports = { DTYPES, NAMES, dtypeInfo, dtypeName, dtypeOfArray };
