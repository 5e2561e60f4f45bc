'use strict';
// Statuses and the error that carries them.

// libhpu's statuses (hpuStatus_t), generated from HPU_STATUS_MAP; the numbers are fixed forever.
const { STATUSES, Status } = require('./abi');

const names = new Map(STATUSES.map(([name, value]) => [value, name]));

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
