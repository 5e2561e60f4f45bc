"""Devices: count, properties, selection as torch.hpu does it."""
import threading
import unittest

import hpu
from support import run_python


class Count(unittest.TestCase):
    def test_default_is_eight(self):
        r = run_python("import hpu; print(hpu.device_count(), hpu.is_available())",
                       env={"HPU_NUM_DEVICES": "", "HPU_VISIBLE_DEVICES": "", "HPU_CONFIG": ""})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["8", "True"])

    def test_environment(self):
        r = run_python("import hpu\n"
                       "print(hpu.device_count(), [hpu.get_device_properties(i).module_id "
                       "for i in range(hpu.device_count())])",
                       env={"HPU_NUM_DEVICES": "4", "HPU_VISIBLE_DEVICES": "3,1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "2 [3, 1]")


class Properties(unittest.TestCase):
    def test_fields(self):
        p = hpu.get_device_properties(1)
        self.assertIsInstance(p, hpu.DeviceProperties)
        self.assertEqual(p.ordinal, 1)
        self.assertEqual(p.profile, "gaudi2")
        self.assertEqual(p.name, "HPU 1 (gaudi2, emulated)")
        self.assertEqual(p.total_memory, 96 << 30)
        self.assertEqual(p.memory_limit, hpu.memory_stats(1)["Limit"])
        self.assertEqual(hpu.get_device_name(1), p.name)
        self.assertEqual(hpu.Device(1).properties, p)
        self.assertIn(p.kernel_isa, ("amx", "avx512", "avx2", "scalar"))

    def test_kernel_isa_follows_hpu_kernel_isa(self):
        r = run_python("import hpu; print(hpu.get_device_properties(0).kernel_isa)",
                       env={"HPU_KERNEL_ISA": "scalar"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "scalar")

    def test_profile_and_fraction(self):
        r = run_python("import hpu; p = hpu.get_device_properties(0); "
                       "print(p.profile, p.total_memory, p.memory_limit, hpu.mem_get_info(0))",
                       env={"HPU_DEVICE_PROFILE": "gaudi3", "HPU_MEMORY_FRACTION": "0.5"})
        self.assertEqual(r.returncode, 0, r.stderr)
        total = 128 << 30
        self.assertEqual(r.stdout.strip(), f"gaudi3 {total} {total // 2} ({total // 2}, {total // 2})")


class Selection(unittest.TestCase):
    def test_context_manager_nests_and_restores(self):
        self.assertEqual(hpu.current_device(), 0)
        with hpu.Device(2) as d:
            self.assertEqual(d, hpu.Device(2))
            self.assertEqual(hpu.current_device(), 2)
            self.assertEqual(hpu.Device(), d)
            self.assertEqual(hpu.get_device_properties().ordinal, 2)
            with hpu.Device("hpu:3"):
                self.assertEqual(hpu.current_device(), 3)
            self.assertEqual(hpu.current_device(), 2)
        self.assertEqual(hpu.current_device(), 0)

    def test_restored_after_an_exception(self):
        with self.assertRaises(KeyError):
            with hpu.Device(1):
                raise KeyError("x")
        self.assertEqual(hpu.current_device(), 0)

    def test_current_device_is_per_thread(self):
        seen = []
        with hpu.Device(1):
            t = threading.Thread(target=lambda: seen.append(hpu.current_device()))
            t.start()
            t.join()
            self.assertEqual(hpu.current_device(), 1)
        self.assertEqual(seen, [0])

    def test_set_device(self):
        try:
            hpu.set_device("hpu:2")
            self.assertEqual(hpu.current_device(), 2)
            with self.assertRaises(hpu.NotFoundError):
                hpu.set_device(99)
            self.assertEqual(hpu.current_device(), 2)
        finally:
            hpu.set_device(0)

    def test_device_arguments_agree(self):
        for arg in (1, "hpu:1", hpu.Device(1)):
            self.assertEqual(hpu.Device(arg).index, 1)
        with hpu.Device(1):
            self.assertEqual(hpu.Device("hpu").index, 1)
            self.assertEqual(hpu.Device(None).index, 1)
        self.assertEqual(str(hpu.Device(1)), "hpu:1")
        self.assertEqual(repr(hpu.Device(1)), "hpu.Device(1)")
        self.assertEqual(len({hpu.Device(1), hpu.Device("hpu:1")}), 1)

    def test_same_handle_for_the_process(self):
        self.assertEqual(hpu.Device(0).handle, hpu.Device("hpu:0").handle)
        self.assertNotEqual(hpu.Device(0).handle, hpu.Device(1).handle)

    def test_synchronize(self):
        hpu.synchronize()
        hpu.synchronize(3)
        hpu.Device(2).synchronize()


class Library(unittest.TestCase):
    def test_version(self):
        self.assertEqual(hpu.library_version(), hpu.__version__)

    def test_star_import_shadows_no_builtin(self):
        import builtins
        self.assertIn("Device", hpu.__all__)
        self.assertIn("mm", hpu.__all__)
        self.assertEqual([n for n in hpu.__all__ if hasattr(builtins, n)], [])
        for name in hpu.__all__:
            self.assertTrue(hasattr(hpu, name), name)

    def test_explicit_library_that_does_not_load(self):
        r = run_python("import hpu", env={"HPU_LIBRARY": "/nonexistent/libhpu.so.0"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: hpu: cannot load HPU_LIBRARY='/nonexistent/libhpu.so.0'", r.stderr)

    def test_missing_library_lists_what_was_tried(self):
        r = run_python("import hpu; print(hpu.library_path())",
                       env={"HPU_LIBRARY": "", "LD_LIBRARY_PATH": "/nonexistent"})
        if r.returncode == 0:  # a libhpu installed system-wide is the only other choice
            self.assertEqual(r.stdout.strip(), "libhpu.so.0")
            return
        self.assertIn("cannot find libhpu; set HPU_LIBRARY", r.stderr)
        self.assertIn("libhpu.so.0 on the system library path", r.stderr)


if __name__ == "__main__":
    unittest.main()
