"""Helpers shared by the binding's tests."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Optional

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 60,
               python: str = sys.executable) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports this package (libhpu reads its
    environment once, so settings under test need a new process)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, os.path.dirname(__file__),
                                                     full.get("PYTHONPATH")) if p)
    full["PYTHONDONTWRITEBYTECODE"] = "1"
    full.update(env or {})
    return subprocess.run([python, "-c", code], env=full, capture_output=True, text=True, timeout=timeout)


def require_env(name: str) -> str:
    """A variable CTest sets for this test; its absence is a failure, not a skip."""
    value = os.environ.get(name)
    if not value:
        raise AssertionError(f"{name} is not set: run this test through CTest (ctest -L bindings)")
    return value
