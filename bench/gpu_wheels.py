"""The wheels bench/gpu_device.sh installs on the GPU machine, made here (issue 46).

    .venv/bin/python bench/gpu_wheels.py            # -> .gpu-wheels/: evalita-llm and what the GPU machine lacks

The GPU machine (``GPU_HAS``: its image's packages; Python 3.12 there) reaches no package index and takes at most
64 MiB with a command (this checkout's tracked files included). So: every distribution that this project (``eval``
extra) and lm-eval (``hf`` extra) need, less what the machine has: each pure-Python one repacked from the files this
venv installed (the same version and files, a new RECORD); each one built for one Python version (a compiled
extension, a ``py311`` tag) downloaded from PyPI for ``TARGET_PYTHON`` at the same version; evalita-llm built as a
wheel. Prints each wheel's size and the total; exits 1 past ``MAX_MIB``.
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
# The GPU machine's image, as the device tool's KINDS.md listed it on 2026-11-17 (python3 3.12.3 there).
GPU_HAS = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec
patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3
uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split()
LEFT = ("evalita-llm",)  # built from this checkout, not repacked
TARGET_PYTHON = "3.12"
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


def pure(name: str) -> bool:
    """Whether the installed distribution's wheel runs on any Python 3 (else it is fetched for ``TARGET_PYTHON``)."""
    tags = [line.split(": ", 1)[1] for line in DISTS[name].read_text("WHEEL").splitlines() if line.startswith("Tag: ")]
    return all(t.endswith("-none-any") and t.split("-")[0] in ("py2", "py3") for t in tags)


def download(name: str, out: Path) -> None:
    """The distribution's wheel, same version, for ``TARGET_PYTHON`` on x86-64 Linux (PyPI)."""
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64") for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", TARGET_PYTHON,
                    "--implementation", "cp", *platforms, "-d", str(out), f"{name}=={DISTS[name].version}"], check=True)


def main() -> int:
    out = ROOT / ".gpu-wheels"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    need = closure([("evalita-llm", ("eval",)), ("lm-eval", ("hf",))]) - {norm(n) for n in GPU_HAS} - set(LEFT)
    for name in sorted(need):
        repack(name, out) if pure(name) else download(name, out)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)], check=True)
    wheels = sorted(out.glob("*.whl"))
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    total = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{total:.2f} MiB in {len(wheels)} wheels ({out}), for Python {TARGET_PYTHON}")
    return 0 if total <= MAX_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
