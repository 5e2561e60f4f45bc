"""The package imports from the build tree, from a cmake --install prefix, and from a
virtual environment after an offline pip install."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import PACKAGE_ROOT, require_env

PROBE = ("import hpu; print(hpu.__file__); print(hpu.library_path()); print(hpu.device_count()); "
         "print(hpu.trainer_library_path())")
NO_LIBRARY_HINTS = {"HPU_LIBRARY": "", "HPU_TRAINER_LIBRARY": "", "LD_LIBRARY_PATH": "", "PYTHONPATH": ""}


class Install(unittest.TestCase):
    def setUp(self):
        self.build = require_env("HPU_BUILD_DIR")
        self.tmp = tempfile.mkdtemp(prefix="hpu-python-install-")
        self.library = os.path.realpath(os.environ["HPU_LIBRARY"])
        self.trainer = os.path.realpath(require_env("HPU_TRAINER_LIBRARY"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def probe(self, python=sys.executable, pythonpath=""):
        env = dict(NO_LIBRARY_HINTS, PYTHONPATH=pythonpath)
        r = subprocess.run([python, "-c", PROBE], env={**os.environ, **env, "PYTHONDONTWRITEBYTECODE": "1"},
                           cwd=self.tmp, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        package, library, count, trainer = r.stdout.split("\n")[:4]
        self.assertGreater(int(count), 0)
        return package, library, trainer

    def test_build_tree(self):
        package, library, trainer = self.probe(pythonpath=os.path.join(self.build, "python"))
        self.assertEqual(os.path.dirname(package), os.path.join(self.build, "python", "hpu"))
        self.assertEqual(os.path.realpath(library), self.library)
        self.assertEqual(os.path.realpath(trainer), self.trainer)

    def test_cmake_install(self):
        prefix = os.path.join(self.tmp, "prefix")
        r = subprocess.run([require_env("HPU_CMAKE"), "--install", self.build, "--prefix", prefix,
                            "--component", "python"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The library's own install rule is tested with the packaging tests; stand it in.
        libdir = os.path.join(prefix, require_env("HPU_INSTALL_LIBDIR"))
        os.makedirs(libdir, exist_ok=True)
        os.symlink(self.library, os.path.join(libdir, "libhpu.so.0"))
        os.symlink(self.trainer, os.path.join(libdir, "libhpu-trainer.so.0"))
        site = os.path.join(prefix, require_env("HPU_PYTHON_INSTALL_DIR"))
        self.assertTrue(os.path.exists(os.path.join(site, "hpu", "py.typed")))
        package, library, trainer = self.probe(pythonpath=site)
        self.assertEqual(os.path.dirname(package), os.path.join(site, "hpu"))
        self.assertEqual(os.path.normpath(library), os.path.join(libdir, "libhpu.so.0"))
        self.assertEqual(os.path.normpath(trainer), os.path.join(libdir, "libhpu-trainer.so.0"))

    def test_pip_install_offline_into_a_venv(self):
        source = os.path.join(self.tmp, "src")  # pip builds in place: keep the checkout clean
        shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        venv = os.path.join(self.tmp, "venv")
        # --system-site-packages: Debian's pip, setuptools and wheel serve the venv offline.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                       check=True, timeout=120)
        python = os.path.join(venv, "bin", "python")
        r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                            "--disable-pip-version-check", "-q", source],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The libraries of an installed prefix: libhpu through HPU_LIBRARY, libhpu-trainer beside it.
        libdir = os.path.join(self.tmp, "lib")
        os.makedirs(libdir)
        for name, target in (("libhpu.so.0", self.library), ("libhpu-trainer.so.0", self.trainer)):
            os.symlink(target, os.path.join(libdir, name))
        env = {**os.environ, **NO_LIBRARY_HINTS, "HPU_LIBRARY": os.path.join(libdir, "libhpu.so.0")}
        r = subprocess.run([python, "-c", PROBE], env=env, cwd=self.tmp, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        package, _, _, trainer = r.stdout.split("\n")[:4]
        self.assertTrue(package.startswith(venv), package)
        self.assertEqual(trainer, os.path.join(libdir, "libhpu-trainer.so.0"))
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(package), "py.typed")))


if __name__ == "__main__":
    unittest.main()
