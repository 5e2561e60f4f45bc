"""Two processes launched from Python with torchrun-style variables: Comm.from_env and all_reduce."""
import os
import socket
import subprocess
import sys
import textwrap
import unittest

WORKER = textwrap.dedent("""
    import hpu
    (comm,) = hpu.Comm.from_env([0])
    t = hpu.tensor([float(comm.rank + 1)] * 5, device=0)
    comm.all_reduce(t)
    comm.synchronize()
    print(comm.rank, comm.world_size, t.tolist(), flush=True)
    comm.destroy()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TwoProcesses(unittest.TestCase):
    def test_all_reduce_between_two_processes(self):
        port = free_port()
        procs = []
        for rank in range(2):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                       RANK=str(rank), LOCAL_RANK=str(rank), HPU_COMM_TIMEOUT="20")
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        lines = sorted(out.strip() for out, _ in outs)
        self.assertEqual(lines, ["0 2 [3.0, 3.0, 3.0, 3.0, 3.0]", "1 2 [3.0, 3.0, 3.0, 3.0, 3.0]"])

    def test_missing_variable_is_named(self):
        env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "HPU_COMM_ID")}
        env.update(MASTER_PORT="29999", WORLD_SIZE="2", RANK="0")
        code = textwrap.dedent("""
            import hpu
            try:
                hpu.Comm.from_env([0])
            except hpu.HpuError as e:
                print(e.status_name, "MASTER_ADDR" in str(e))
        """)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "HPU_ERROR_CONFIG True")


if __name__ == "__main__":
    unittest.main()
