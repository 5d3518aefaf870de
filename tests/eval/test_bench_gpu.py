"""bench/gpu.py, the one GPU command (issue 38), end to end on the CPU with a tiny random model, through
bench/gpu_device.sh, the script the GPU machine runs (issue 46; here every module is installed: no wheel is)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "bench" / "gpu.py"
DEVICE = ROOT / "bench" / "gpu_device.sh"
NUMBER = r"(\d+(?:\.\d+)?)"


def run(*args: str, script: Path = GPU) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHON=sys.executable)
    command = ["bash", str(script)] if script.suffix == ".sh" else [sys.executable, str(script)]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300)


def test_tiny_shape_runs_every_engine_it_can_and_says_which_it_cannot() -> None:
    # gpu_device.sh passes --engines ours-hf,lmeval-hf --limit 1 --budget-s 480 --markdown, then these
    proc = run("--shape", "tiny", "--device", "cpu", "--max-new", "4", "--threads", "1", "--tasks", "wic,faq,ner_adg",
               "--engines", "ours-hf,lmeval-hf,ours-vllm,lmeval-vllm", "--peak-tflops", "0.5", script=DEVICE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"^gpu_device\.sh \| Python 3\.\d+\.\d+ \| torch \S+ \| transformers \S+ .*\| lm_eval 0\.4\.\d+ .* \| no GPU$", out, re.M)
    assert re.search(r"^gpu_device\.sh \| bench/gpu\.py took \d+ s$", out, re.M)
    assert "limit: 1 documents per task entry and setting (--limit)" in out
    # One document per entry: WiC 6 prompts x 2 choices, FAQ 6 prompts x 4 answers, NER 2 prompts x 1 generation.
    expected = {"wic 0-shot": 12, "wic 5-shot": 12, "faq 0-shot": 24, "faq 5-shot": 24, "ner_adg 0-shot": 2, "ner_adg 5-shot": 2}
    tasks = re.findall(rf"^task (\S+ \d-shot) +(ll|gen) +\| requests +(\d+) \| prompt tokens +(\d+) \| ours hf {NUMBER} s \| lm-eval HF {NUMBER} s"
                       r" \| same answers as ours hf: lm-eval HF (\d+)/(\d+)$", out, re.M)
    assert {key: int(n) for key, _, n, *_ in tasks} == expected
    for key, kind, n, prompt, ours, theirs, same, items in tasks:
        assert int(prompt) > 0 and float(ours) > 0 and float(theirs) > 0
        # items: contexts (MC: one per prompt) or generations; the same model answers alike on both sides
        assert int(items) == (int(n) if kind == "gen" else 6) and same == items, key
    engine_line = (rf"^engine (ours hf|lm-eval HF): wall {NUMBER} s \(load and warm-up {NUMBER} s, process {NUMBER} s\) \| model tokens (\d+) "
                   rf"\| peak memory {NUMBER} GiB \(resident memory of the process\) \| projected to the whole splits of the entries run {NUMBER} h$")
    engines = {m[0]: m[1:] for m in re.findall(engine_line, out, re.M)}
    assert set(engines) == {"ours hf", "lm-eval HF"}
    # both HF schedulers group a context's choices alike: the same counted model tokens
    assert engines["ours hf"][3] == engines["lm-eval HF"][3] and int(engines["ours hf"][3]) > 0
    assert all(float(engines[e][4]) > 0 for e in engines)
    # Speed per request kind: the tokens and seconds of its rows; TFLOPS = 2 x weights x tokens / s; MFU against --peak-tflops.
    speed = rf"^engine (ours hf|lm-eval HF) speed on (log-likelihoods|generations): (\d+) model tokens in {NUMBER} s: (\d+) tokens/s " \
            rf"\| {NUMBER} TFLOPS \(2 x (\d+) weights a token\) \| MFU {NUMBER} % of 0\.5 TFLOPS \(--peak-tflops\)$"
    speeds = re.findall(speed, out, re.M)
    assert len(speeds) == 4, out
    label = {"ours hf": "ours hf", "lm-eval HF": "lm-eval HF"}
    for engine, kind, tokens, wall, per_s, tflops, weights, mfu in speeds:
        rows = [t for t in tasks if (t[1] == "ll") == (kind == "log-likelihoods")]
        assert abs(float(wall) - sum(float(t[4 if label[engine] == "ours hf" else 5]) for t in rows)) < 0.01 * len(rows) + 0.01
        # the seconds are printed to 0.01, the tokens per second to 1, the TFLOPS to 1e-4, the MFU to 0.01 %
        assert int(weights) > 0 and int(tokens) / (float(wall) + 0.005) - 1 <= int(per_s) <= int(tokens) / (float(wall) - 0.005) + 1
        assert abs(float(tflops) - 2 * int(weights) * int(per_s) / 1e12) <= 1e-4 + 2 * int(weights) / 1e12
        assert abs(float(mfu) - 100 * float(tflops) / 0.5) <= 0.03
    assert sum(int(t) for e, k, t, *_ in speeds if e == "ours hf") == int(engines["ours hf"][3])  # the kinds make up the whole
    walls = {e: float(v[0]) for e, v in engines.items()}
    ratio = re.search(rf"^ratio lm-eval HF / ours hf: wall {NUMBER}x, model tokens 1\.00x$", out, re.M)
    assert ratio and abs(float(ratio[1]) / (walls["lm-eval HF"] / walls["ours hf"]) - 1) < 0.05  # the walls are printed to 0.01 s
    if importlib.util.find_spec("vllm") is None:
        assert "engine ours vllm: not available: vllm is not installed in this Python" in out
        assert "engine lm-eval vLLM: not available: vllm is not installed in this Python" in out
        assert "engines run: ours hf, lm-eval HF; not available: ours vllm, lm-eval vLLM;" in out
    assert re.search(r"^On a GPU \(not this run\): `python bench/gpu\.py` on a CUDA machine measures these rows on a Llama-3\.1-8B-shaped model", out, re.M)
    table = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| task")]
    # the public WiC test split built from raw/ has 500 documents: the projection's scale
    assert table[0].startswith("| wic | 0 | 1 (500) | 12 | ")
    assert len(table) == len(expected) + 1 and table[-1].startswith(f"| **total** | | | {sum(expected.values())} |")


def test_the_8b_shape_on_a_cpu_is_refused_in_one_line() -> None:
    proc = run("--device", "cpu")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "--shape llama8b needs 16 GB of bfloat16 weights: run it on a CUDA machine, or add --shape tiny (or --model PATH) on a CPU")
    assert "Traceback" not in proc.stderr
