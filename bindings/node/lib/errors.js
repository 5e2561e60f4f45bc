'use strict';
// Statuses and the error that carries them.

/** libhpu's statuses (hpuStatus_t); the numbers are fixed forever. */
const Status = Object.freeze({
  SUCCESS: 0,
  INVALID_ARGUMENT: 1,
  INVALID_HANDLE: 2,
  OUT_OF_MEMORY: 3,
  NOT_FOUND: 4,
  BUSY: 5,
  NOT_READY: 6,
  UNSUPPORTED: 7,
  CONFIG: 8,
  IO: 9,
  NOT_AVAILABLE: 10,
  INVALID_USAGE: 11,
  REMOTE: 12,
  TIMEOUT: 13,
  ABORTED: 14,
  ADDRESS_IN_USE: 15,
  INTERNAL: 99,
});

const names = new Map(Object.entries(Status).map(([k, v]) => [v, v === 0 ? 'HPU_SUCCESS' : `HPU_ERROR_${k}`]));

/** The C name of a status ("HPU_ERROR_NOT_FOUND"), "HPU_STATUS_UNKNOWN" for other numbers. */
function statusName(status) {
  return names.get(status) ?? 'HPU_STATUS_UNKNOWN';
}

/**
 * A failed libhpu call. `status` is the number, `code` (and `statusName`) its C
 * name, `message` libhpu's detail: the function, the argument and its value.
 */
class HpuError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'HpuError';
    this.status = status;
    this.code = statusName(status);
  }

  get statusName() {
    return this.code;
  }
}

/** An HpuError for a check the binding makes before calling libhpu. */
function invalidArgument(message) {
  return new HpuError(Status.INVALID_ARGUMENT, message);
}

module.exports = { Status, statusName, HpuError, invalidArgument };
