#!/usr/bin/env python3
"""A tour of libhpu's Python binding: devices, memory statistics, streams, errors.

Run: HPU_LIBRARY=build/libhpu.so.0 PYTHONPATH=bindings/python python3 examples/python_quickstart.py
"""
import array

import hpu

print(f"libhpu {hpu.library_version()}: {hpu.device_count()} devices")
for i in range(min(2, hpu.device_count())):
    p = hpu.get_device_properties(i)
    print(f"  hpu:{i} {p.name}: {p.total_memory / 2**30:.0f} GiB, limit {p.memory_limit / 2**30:.0f} GiB")

# Device memory on device 1, filled from an array and read back.
with hpu.Device(1):
    values = array.array("f", (i * 0.25 for i in range(1 << 18)))
    with hpu.mem_alloc(len(values) * values.itemsize) as mem:
        mem.copy_from_host(values)
        back = array.array("f", bytes(len(values) * values.itemsize))
        mem.copy_to_host(back)
        assert back == values
        stats = hpu.memory_stats()
        print("memory_stats(hpu:1) with 1 MiB allocated:")
        for key in hpu.HABANA_STATS_KEYS:
            print(f"  {key:18} {stats[key]}")
    print(f"after free: InUse={hpu.memory_allocated()} MaxInUse={hpu.max_memory_allocated()}")
    hpu.reset_peak_memory_stats()
    print(f"after reset_peak_memory_stats: MaxInUse={hpu.max_memory_allocated()}")

# Work queued on a stream, timed with events.
stream = hpu.Stream()
start, end = hpu.Event(), hpu.Event()
with hpu.mem_alloc(64 << 20) as mem:
    start.record(stream)
    mem.fill(0x5A, stream=stream)
    end.record(stream)
    end.synchronize()
    print(f"memset of 64 MiB on a stream: {start.elapsed_time(end):.3f} ms")
stream.close()

# Every failure is an hpu.HpuError subclass with libhpu's message.
try:
    hpu.mem_alloc(hpu.mem_get_info()[1] + 1)
except hpu.OutOfMemoryError as e:
    print(f"caught {e.status_name}: {e.message}")
