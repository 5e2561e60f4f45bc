'use strict';
// libhpu's log level and profiler.

const { declare, hpuFree, readString } = require('./native');
const { invalidArgument } = require('./errors');

const C = declare({
  hpuSetLogLevel: 'int hpuSetLogLevel(int level)',
  hpuGetLogLevel: 'int hpuGetLogLevel(_Out_ int *level)',
  hpuProfilerStart: 'int hpuProfilerStart(const char *path)',
  hpuProfilerStop: 'int hpuProfilerStop(void)',
  hpuProfilerGetSummary: 'int hpuProfilerGetSummary(_Out_ void **text)',
});

/** hpuLogLevel_t names, by number. */
const LOG_LEVELS = Object.freeze(['off', 'error', 'warn', 'info', 'debug', 'trace']);

/** Drops log lines below `level`; overrides HPU_LOG_LEVEL. */
function setLogLevel(level) {
  const i = LOG_LEVELS.indexOf(level);
  if (i < 0) throw invalidArgument(`level ${JSON.stringify(level)} is not one of ${LOG_LEVELS.join(', ')}`);
  C.hpuSetLogLevel(i);
}

function getLogLevel() {
  const out = [0];
  C.hpuGetLogLevel(out);
  return LOG_LEVELS[out[0]];
}

/** Records API calls, stream operations and memory changes into a Chrome/Perfetto trace at `path`. */
const profilerStart = (path) => { C.hpuProfilerStart(String(path)); };
/** Stops recording and writes the trace. */
const profilerStop = () => { C.hpuProfilerStop(); };

/** The last stopped profile as a text table. */
function profilerSummary() {
  const out = [null];
  C.hpuProfilerGetSummary(out);
  try {
    return readString(out[0]);
  } finally {
    hpuFree(out[0]);
  }
}

module.exports = { LOG_LEVELS, setLogLevel, getLogLevel, profilerStart, profilerStop, profilerSummary };
