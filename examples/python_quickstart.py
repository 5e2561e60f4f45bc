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

# Tensors: from lists (or numpy arrays, or bytes), bfloat16 rounded on the device.
x = hpu.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
print(f"x = {x.tolist()}, x.T[1] = {x.T[1].tolist()}")
b = x.to(hpu.bfloat16)
print(f"as bfloat16: {b.tobytes().hex()} (raw bits), back: {b.tolist()}")

# Collectives over four devices of this process, with torch.distributed's names.
comms = hpu.Comm.init_all([0, 1, 2, 3])
grads = [hpu.tensor([float(r + 1)] * 4, device=r) for r in range(4)]
for comm, grad in zip(comms, grads):
    comm.all_reduce(grad, op=hpu.ReduceOp.AVG)
for comm in comms:
    comm.synchronize()
print(f"all_reduce(avg) over {len(comms)} ranks: {grads[3].tolist()}")
for comm in comms:
    comm.destroy()

# Ops under autocast: mm is in Habana's lower-precision list, so it runs in bfloat16.
w = hpu.tensor([[0.5, -1.0], [2.0, 0.25], [1.0, 1.0]])
with hpu.autocast(dtype=hpu.bfloat16):
    y = hpu.relu(x @ w)
print(f"relu(x @ w) under autocast: {y.tolist()} ({y.dtype})")
