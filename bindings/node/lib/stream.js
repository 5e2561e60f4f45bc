'use strict';
// Streams (in-order queues run by a device's workers) and events (markers on them).

const { AsyncLocalStorage } = require('node:async_hooks');
const { C } = require('./native');
const { Status, HpuError } = require('./errors');
const { resolve } = require('./device');

// Streams and events not closed explicitly are destroyed when collected.
const streamReaper = new FinalizationRegistry((handle) => {
  try { C.hpuStreamDestroy(handle); } catch { /* the process may be ending */ }
});
const eventReaper = new FinalizationRegistry((handle) => {
  try { C.hpuEventDestroy(handle); } catch { /* the process may be ending */ }
});

/** True when `call` succeeds, false when it reports HPU_ERROR_NOT_READY. */
function ready(call) {
  try {
    call();
    return true;
  } catch (e) {
    if (e instanceof HpuError && e.status === Status.NOT_READY) return false;
    throw e;
  }
}

/** A stream of a device: `new Stream()` creates one on the current device. */
class Stream {
  constructor(device, handle) {
    this.device = resolve(device);
    if (handle !== undefined) {
      this.handle = handle; // a device's default stream: never destroyed
      this.owned = false;
      return;
    }
    const out = [null];
    C.hpuStreamCreate(out, this.device.handle);
    this.handle = out[0];
    this.owned = true;
    streamReaper.register(this, this.handle, this);
  }

  /** Waits until all work queued so far has run; throws the stream's sticky error. */
  synchronize() {
    C.hpuStreamSynchronize(this.handle);
  }

  /** True when all queued work has completed, false while some is pending. */
  query() {
    return ready(() => C.hpuStreamQuery(this.handle));
  }

  /** Work queued on this stream from now on waits for `event`'s latest record. */
  waitEvent(event) {
    C.hpuStreamWaitEvent(this.handle, event.handle);
  }

  /** Work queued on this stream from now on waits for the work queued on `other` so far. */
  waitStream(other) {
    this.waitEvent(other.recordEvent());
  }

  /** Records `event` (a new one by default) on this stream and returns it. */
  recordEvent(event = new Event()) {
    event.record(this);
    return event;
  }

  /** Destroys the stream (after its queued work); a default stream is left alone. Idempotent. */
  close() {
    if (!this.owned) return;
    this.owned = false;
    streamReaper.unregister(this);
    C.hpuStreamDestroy(this.handle);
  }

  equals(other) {
    return other instanceof Stream && other.handle === this.handle;
  }
}

/** A marker recorded on a stream, for ordering and timing. */
class Event {
  constructor() {
    const out = [null];
    C.hpuEventCreate(out);
    this.handle = out[0];
    this.live = true;
    eventReaper.register(this, this.handle, this);
  }

  /** Records the event on `stream` (the current device's default stream by default). */
  record(stream = defaultStream()) {
    C.hpuEventRecord(stream.handle, this.handle);
  }

  synchronize() {
    C.hpuEventSynchronize(this.handle);
  }

  /** True when the latest record has completed, false while pending. */
  query() {
    return ready(() => C.hpuEventQuery(this.handle));
  }

  /** Milliseconds between the completion of this event and of `end`. */
  elapsedTime(end) {
    const ms = [0];
    C.hpuEventElapsedTime(this.handle, end.handle, ms);
    return ms[0];
  }

  /** Destroys the event. Idempotent. */
  close() {
    if (!this.live) return;
    this.live = false;
    eventReaper.unregister(this);
    C.hpuEventDestroy(this.handle);
  }
}

/** The default stream of `device` (the current one by default). */
function defaultStream(device) {
  const d = resolve(device);
  const out = [null];
  C.hpuDeviceGetDefaultStream(d.handle, out);
  return new Stream(d, out[0]);
}

const chosen = new AsyncLocalStorage();

/**
 * Runs fn() with `stream` as the stream that tensor operations, ops and
 * collectives on its device are queued on (instead of the device's default
 * stream), following fn's awaits; returns fn's result.
 */
function withStream(stream, fn) {
  const map = new Map(chosen.getStore() ?? []);
  map.set(stream.device.index, stream);
  return chosen.run(map, fn, stream);
}

/** The handle of the stream withStream() chose for a device, or null (its default stream). */
function streamFor(deviceIndex) {
  return chosen.getStore()?.get(deviceIndex)?.handle ?? null;
}

/** The stream withStream() chose for `device`, else its default stream. */
function currentStream(device) {
  const d = resolve(device);
  return chosen.getStore()?.get(d.index) ?? defaultStream(d);
}

module.exports = { Stream, Event, defaultStream, withStream, streamFor, currentStream };
