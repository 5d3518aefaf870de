"""Where EEE's own tools run: a Python >= 3.12 with the ``every-eval-ever`` 0.3.0 package (it needs that Python;
ours may be older). ``EEE_PYTHON`` names one; else ``python3.13``/``python3.12`` on PATH are tried."""

from __future__ import annotations

import os
import shutil
import subprocess

NEEDED = "every-eval-ever 0.3.0 (Python >= 3.12)"


def eee_python() -> str | None:
    """A Python that imports ``every_eval_ever``, or None."""
    candidates = [os.environ.get("EEE_PYTHON")] + [shutil.which(n) for n in ("python3.13", "python3.12")]
    for python in candidates:
        if not python:
            continue
        try:
            probe = subprocess.run([python, "-c", "import every_eval_ever.cli"], capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return python
    return None
