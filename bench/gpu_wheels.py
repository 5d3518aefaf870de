"""The wheels bench/gpu_device.sh installs on the GPU machine, made here without a network (issue 46).

    .venv/bin/python bench/gpu_wheels.py            # -> .gpu-wheels/: evalita-llm and what the GPU machine lacks

The GPU machine has PyTorch with CUDA, transformers, tokenizers, pandas, pyarrow and sacrebleu (``GPU_HAS``), reaches
no package index, and takes at most 64 MiB with a command (this checkout's tracked files included). So: every
distribution that this project (with its ``eval`` extra) and lm-eval need, less what ``GPU_HAS`` brings, less ``LEFT``
(large, and never imported by bench/gpu.py's path: the run's statistics, lm-eval's metrics), each repacked from the
files this venv installed (the same version and files, a new RECORD), and evalita-llm built as a wheel. Prints each
wheel's size and the total; exits 1 past ``MAX_MIB``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
GPU_HAS = ("torch", "transformers", "tokenizers", "pandas", "pyarrow", "sacrebleu")
# The issue says the GPU machine lacks these even where GPU_HAS's closure here holds them (pydantic: huggingface_hub's CLI).
GPU_LACKS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection")
LEFT = ("scipy", "scikit-learn", "matplotlib", "contourpy", "fonttools", "kiwisolver", "pillow", "cycler", "pyparsing", "joblib",
        "threadpoolctl", "evalita-llm")
MAX_MIB = 40.0  # the tracked files take about 18 MiB of the 64 a command carries


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


DISTS = {norm(d.metadata["Name"]): d for d in md.distributions()}


def closure(roots: list[tuple[str, tuple[str, ...]]]) -> set[str]:
    """The installed distributions ``roots`` (name, extras) need, themselves included."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name, extras = todo.pop()
        if norm(name) in seen or norm(name) not in DISTS:
            continue
        seen.add(norm(name))
        for line in DISTS[norm(name)].requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((req.name, tuple(req.extras)))
    return seen


def repack(name: str, out: Path) -> Path:
    """The installed distribution ``name`` as a wheel in ``out``: its files and dist-info as installed, a new RECORD."""
    dist = DISTS[name]
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in f.parts and Path(dist.locate_file(f)).is_file()]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    tags = [line.split(": ", 1)[1].split("-") for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag: ")]
    tag = "-".join(".".join(dict.fromkeys(t[k] for t in tags)) for k in range(3))  # py2-none-any + py3-none-any: py2.py3-none-any
    wheel = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            if f.parts[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json") and f.parts[0] == info:
                continue
            data = Path(dist.locate_file(f)).read_bytes()
            zf.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f},sha256={digest},{len(data)}")
        zf.writestr(f"{info}/RECORD", "\n".join(record + [f"{info}/RECORD,,"]) + "\n")
    return wheel


def main() -> int:
    out = ROOT / ".gpu-wheels"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    need = (closure([("evalita-llm", ("eval",)), ("lm-eval", ("hf",))]) - closure([(n, ()) for n in GPU_HAS]) | set(GPU_LACKS)) - set(LEFT)
    wheels = [repack(name, out) for name in sorted(need)]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)], check=True)
    wheels += sorted(out.glob("evalita_llm-*.whl"))
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    total = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{total:.2f} MiB in {len(wheels)} wheels ({out}); left out: {', '.join(LEFT[:-1])}; Python {sys.version.split()[0]} "
          "(the compiled wheels need the same minor version on the GPU machine)")
    return 0 if total <= MAX_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
