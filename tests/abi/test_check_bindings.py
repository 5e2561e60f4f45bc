"""The checks that keep the bindings true to the headers catch a broken binding:
each test copies the headers, ledgers and bindings, breaks one thing the way a
hand edit or a header change would, and expects tools/abi/gen_bindings.py
--check or tools/abi/check_bindings.py to fail and say what broke.

usage: python3 -m unittest test_check_bindings   (SOURCE_DIR in HPU_SOURCE_DIR)"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SRC = Path(os.environ.get("HPU_SOURCE_DIR", Path(__file__).resolve().parents[2]))
TOOLS = SRC / "tools" / "abi"
COPIED = ("include/hpu", "abi", "bindings/python/hpu", "bindings/node/lib")
sys.path.insert(0, str(TOOLS))
import hpuabi  # noqa: E402


class BrokenBindings(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hpu-bindings-")
        self.root = Path(self.tmp, "src")
        for rel in COPIED:
            shutil.copytree(SRC / rel, self.root / rel)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def edit(self, rel, old, new):
        path = self.root / rel
        text = path.read_text()
        self.assertIn(old, text, f"{rel} no longer holds the text this test edits")
        path.write_text(text.replace(old, new, 1))

    def run_tool(self, *args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True)

    def current(self):
        return self.run_tool(str(TOOLS / "gen_bindings.py"), "--source", str(self.root),
                             "--check", os.path.join(self.tmp, "generated"))

    def calls(self):
        return self.run_tool(str(TOOLS / "check_bindings.py"), str(self.root))

    def test_the_copy_passes(self):
        for r in (self.current(), self.calls()):
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_renamed_argument_makes_the_generated_files_stale(self):
        self.edit("include/hpu/memory.h", "hpuMemset(void *dst, int value, size_t bytes)",
                  "hpuMemset(void *dst, int value, size_t nbytes)")
        r = self.current()
        self.assertEqual(r.returncode, 1)
        self.assertIn('("nbytes", c_size_t, "size_t")', r.stderr)
        self.assertIn("no longer match(es) include/hpu/*.h; regenerate with", r.stderr)
        self.assertIn("python3 tools/abi/gen_bindings.py", r.stderr)

    def test_a_hand_edited_generated_type_is_found(self):
        self.edit("bindings/python/hpu/_abi.py", '("bytes", c_size_t, "size_t")]),', '("bytes", c_int, "size_t")]),')
        r = self.current()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/python/hpu/_abi.py", r.stderr)

    def test_a_changed_type_makes_the_node_declarations_stale(self):
        self.edit("include/hpu/tensor.h", "hpuTensorFill(hpuStream_t stream, hpuTensor_t tensor, double value)",
                  "hpuTensorFill(hpuStream_t stream, hpuTensor_t tensor, float value)")
        r = self.current()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/node/lib/abi.js", r.stderr)
        self.assertIn("float value", r.stderr)

    def test_a_python_call_with_an_argument_too_few(self):
        self.edit("bindings/python/hpu/memory.py", "_lib.hpuMemset(d, value, nbytes)", "_lib.hpuMemset(d, value)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/python/hpu/memory.py", r.stderr)
        self.assertIn("hpuMemset is called with 2 argument(s) but takes 3 (dst, value, bytes)", r.stderr)

    def test_a_parameter_added_in_a_header_is_found_in_the_ops_wrappers(self):
        self.edit("include/hpu/ops.h", "hpuMm(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out)",
                  "hpuMm(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, int transpose_b, hpuTensor_t *out)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        for binding in ("bindings/python/hpu/ops.py", "bindings/node/lib/ops.js"):
            self.assertIn(f"{binding}:", r.stderr)
        self.assertIn("hpuMm is called with 3 argument(s) after the stream but takes 4 (a, b, transpose_b, out)",
                      r.stderr)

    def test_a_function_that_no_longer_exists(self):
        self.edit("bindings/node/lib/stream.js", "C.hpuStreamQuery(", "C.hpuStreamPoll(")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/node/lib/stream.js", r.stderr)
        self.assertIn("hpuStreamPoll is not a function of include/hpu/*.h", r.stderr)

    def test_a_function_removed_from_the_headers(self):
        self.edit("include/hpu/ops.h", "HPU_API hpuStatus_t hpuScaleInplace(", "hpuStatus_t hpuScaleInplace(")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("hpuScaleInplace is not a function", r.stderr)

    def test_a_new_options_struct_and_function_are_generated_with_the_compilers_layout(self):
        # What a header change may bring: flags from shifts, an options struct of mixed
        # types (its layout is checked against the C compiler's), a function taking it.
        self.edit("include/hpu/ops.h", "HPU_EXTERN_C_BEGIN", """typedef enum hpuEpilogue {
  HPU_EPILOGUE_NONE = 0,
  HPU_EPILOGUE_BIAS = 1u << 0,
  HPU_EPILOGUE_RELU = 1u << 1,
  HPU_EPILOGUE_BIAS_RELU = HPU_EPILOGUE_BIAS | HPU_EPILOGUE_RELU
} hpuEpilogue_t;
typedef struct hpuMmExOptions {
  size_t struct_size;
  hpuEpilogue_t epilogue;
  hpuTensor_t bias;
  hpuDataType_t out_dtype;
  unsigned int flags;
  double beta;
  char tag[3];
} hpuMmExOptions_t;

HPU_EXTERN_C_BEGIN
HPU_API hpuStatus_t hpuMmEx(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b,
                            const hpuMmExOptions_t *options, hpuTensor_t *out);""")
        self.edit("abi/symbols.txt", "\nhpuMm ", "\nhpuMmEx 0.1\nhpuMm ")
        r = self.run_tool(str(TOOLS / "gen_bindings.py"), "--source", str(self.root))
        self.assertEqual(r.returncode, 0, r.stderr)
        abi_py = (self.root / "bindings/python/hpu/_abi.py").read_text()
        self.assertIn("HPU_EPILOGUE_BIAS_RELU = 3", abi_py)
        self.assertIn('("options", POINTER(hpuMmExOptions_t), "const hpuMmExOptions_t *")', abi_py)
        self.assertIn("'hpuStatus_t hpuMmEx(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, "
                      "const hpuMmExOptions_t *options, _Out_ hpuTensor_t *out)'",
                      (self.root / "bindings/node/lib/abi.js").read_text())
        r = self.run_tool(str(TOOLS / "check_bindings.py"), str(self.root), "--cc", os.environ.get("CC", "cc"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{len(hpuabi.parse(self.root).structs)} struct layouts", r.stdout)

    # A reorder that keeps the number of arguments: what the checker classifies (a
    # stream, self's handle, a float, an options struct, an argument named like a
    # parameter) must sit at a parameter of its kind.
    def test_a_python_call_with_the_stream_last_again(self):
        self.edit("bindings/python/hpu/tensor.py",
                  "_lib.hpuTensorFill(stream_for(self.device.index), self._handle, float(value))",
                  "_lib.hpuTensorFill(self._handle, float(value), stream_for(self.device.index))")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/python/hpu/tensor.py:", r.stderr)
        self.assertIn("hpuTensorFill's hpuStream_t stream is given self._handle, an hpuTensor_t; "
                      "see include/hpu/tensor.h", r.stderr)
        self.assertIn("hpuTensorFill's hpuTensor_t tensor is given float(value), a float", r.stderr)
        self.assertIn("hpuTensorFill's double value is given stream_for(self.device.index), an hpuStream_t", r.stderr)

    def test_a_node_call_with_the_stream_and_the_communicator_swapped(self):
        self.edit("bindings/node/lib/comm.js", "C.hpuBarrier(this._stream(), this.handle)",
                  "C.hpuBarrier(this.handle, this._stream())")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bindings/node/lib/comm.js:", r.stderr)
        self.assertIn("hpuBarrier's hpuStream_t stream is given this.handle, an hpuComm_t", r.stderr)
        self.assertIn("hpuBarrier's hpuComm_t comm is given this._stream(), an hpuStream_t", r.stderr)

    def test_a_node_call_without_its_stream(self):
        self.edit("bindings/node/lib/memory.js", "C.hpuMemsetAsync(stream.handle, d, value, n)",
                  "C.hpuMemsetAsync(d, value, n, 0)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("hpuMemsetAsync's hpuStream_t stream is given d, not an hpuStream_t", r.stderr)

    def test_two_tensors_swapped_are_found_by_their_names(self):
        self.edit("bindings/python/hpu/ops.py", "_call(_lib.hpuAddInplace, dst, src, alpha)",
                  "_call(_lib.hpuAddInplace, src, dst, alpha)")
        self.edit("bindings/node/lib/tensor.js", "C.hpuTensorCopy(this._stream(), this.handle, src.handle)",
                  "C.hpuTensorCopy(this._stream(), src.handle, this.handle)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("hpuAddInplace's hpuTensor_t dst is given src, which names its parameter src", r.stderr)
        self.assertIn("hpuAddInplace's hpuTensor_t src is given dst, which names its parameter dst", r.stderr)
        self.assertIn("hpuTensorCopy's hpuTensor_t dst is given src.handle, which names its parameter src", r.stderr)

    def test_a_call_of_a_function_whose_options_replaced_two_arguments(self):
        # hpuNllLoss(stream, input, target, reduction, ignore_index, &loss) became
        # (stream, input, target, weight, options, &loss): the count is the same.
        self.edit("bindings/python/hpu/ops.py", "_call(_lib.hpuNllLoss, input, target, weight, options, OUT)",
                  "_call(_lib.hpuNllLoss, input, target, reduction, ignore_index, OUT)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("hpuNllLoss's const hpuLossOptions_t * options is given ignore_index, not an options struct",
                      r.stderr)

    def test_a_node_call_with_an_argument_too_many(self):
        self.edit("bindings/node/lib/ops.js", "call('hpuCast', x, dtypeInfo(dtype).value, OUT)",
                  "call('hpuCast', x, dtypeInfo(dtype).value, 0, OUT)")
        r = self.calls()
        self.assertEqual(r.returncode, 1)
        self.assertIn("hpuCast is called with 4 argument(s) after the stream but takes 3 (x, dtype, out)", r.stderr)


if __name__ == "__main__":
    unittest.main()
