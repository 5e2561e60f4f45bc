'use strict';
// libhpu's log level, its log lines delivered to a JavaScript callback, and the
// profiler.
//
// The lines reach JavaScript through a pipe, not a C callback: koffi runs a
// callback that a libhpu thread calls on the main thread and makes that thread
// wait until the event loop gets to it, and the main thread may be waiting in
// libhpu for that very thread (a rendezvous, a synchronize): a deadlock. Instead
// libhpu appends each line to the pipe (hpuSetLogFile, non-blocking: a line that
// finds the pipe full is dropped, a thread never waits) and the event loop reads
// them, so callbacks run on the main thread once it is free.

const fs = require('node:fs');
const net = require('node:net');
const { koffi, C, hpuFree, readString } = require('./native');
const { invalidArgument } = require('./errors');


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

// "2026-11-21T10:55:12.123456Z hpu[1234] rank=0 device=1 WARN alloc: message" (hpuSetLogCallback(3))
const LINE = /^(\S+) hpu\[(\d+)\] rank=(\S+) device=(\S+) ([A-Z]+) ([\w.-]+): (.*)$/s;

/** A line as an object: { level, component, message, time, pid, rank, device, line }. */
function parseLine(line) {
  const m = LINE.exec(line);
  if (!m) return { level: 'warn', component: '', message: line, time: '', pid: 0, rank: null, device: null, line };
  const id = (v) => (v === '-' ? null : Number(v));
  return {
    level: m[5].toLowerCase(), component: m[6], message: m[7], time: m[1], pid: Number(m[2]), rank: id(m[3]),
    device: id(m[4]), line,
  };
}

let libc = null;
let reader = null; // the pipe's read side while a callback is set

function openPipe() {
  libc ??= koffi.load('libc.so.6');
  const pipe2 = libc.func('int pipe2(int *fds, int flags)'); // fds: an Int32Array(2) it fills
  const O_NONBLOCK = 0o4000;
  const O_CLOEXEC = 0o2000000;
  const fds = new Int32Array(2);
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) !== 0) throw new Error('hpu: setLogCallback: pipe2 failed');
  // Room for bursts while the main thread is busy (the default is 64 KiB).
  const F_SETPIPE_SZ = 1031;
  libc.func('int fcntl(int fd, int cmd, ...)')(fds[1], F_SETPIPE_SZ, 'int', 1 << 20);
  return [fds[0], fds[1]];
}

/**
 * Delivers libhpu's log lines to `fn(level, line, record)` instead of stderr (or
 * HPU_LOG_FILE): level is 'error'..'trace', line the whole line and record its
 * parts ({ level, component, message, time, pid, rank, device, line }). Lines of
 * every libhpu thread arrive on the main thread, in order, once the event loop
 * runs; a line logged while more than 1 MiB are waiting is dropped. null
 * restores the default destination. The pipe does not keep the process alive.
 */
function setLogCallback(fn) {
  if (fn !== null && typeof fn !== 'function') throw new TypeError('setLogCallback: fn must be a function or null');
  if (reader) {
    C.hpuSetLogFile(process.env.HPU_LOG_FILE || null); // libhpu closes its end: the reader drains and ends
    reader = null;
  }
  if (fn === null) return;
  const [rfd, wfd] = openPipe();
  try {
    C.hpuSetLogFile(`/proc/self/fd/${wfd}`);
  } catch (e) {
    fs.closeSync(rfd);
    throw e;
  } finally {
    fs.closeSync(wfd); // libhpu holds its own write end
  }
  const socket = new net.Socket({ fd: rfd, readable: true, writable: false });
  socket.unref();
  socket.setEncoding('utf8');
  let pending = '';
  socket.on('data', (chunk) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop();
    for (const line of lines) {
      const record = parseLine(line);
      try {
        fn(record.level, line, record);
      } catch (e) {
        process.nextTick(() => { throw e; }); // the callback's own error, as an uncaught exception
      }
    }
  });
  socket.on('error', () => {});
  reader = socket;
}

/**
 * Writes `message` through libhpu's logging as one line of `component` (default
 * 'node') at `level` ('error'..'trace'): libhpu's level, HPU_LOG_FILE and the
 * log callback apply as to libhpu's own lines.
 */
function logWrite(level, message, component = 'node') {
  const i = LOG_LEVELS.indexOf(level);
  if (i < 1) throw invalidArgument(`level ${JSON.stringify(level)} is not one of ${LOG_LEVELS.slice(1).join(', ')}`);
  C.hpuLogWrite(i, String(component), String(message));
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

module.exports = {
  LOG_LEVELS, setLogLevel, getLogLevel, setLogCallback, logWrite, profilerStart, profilerStop, profilerSummary,
};
