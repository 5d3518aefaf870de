"""bench/vllm_stream.py's comparison of the per-prompt and stream runs' sample files (the runs need
vLLM; their line is in bench/README.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "vllm_stream.py"


def _bench():
    spec = importlib.util.spec_from_file_location("vllm_stream_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_compared_byte_for_byte_then_by_their_floats() -> None:
    compare = _bench().compare_samples
    a = {"sa_p1.jsonl": '{"doc_id": 0, "lls": [-1.5, -2.0], "pred": 0}\n{"doc_id": 1, "lls": [-3.0, -1.0], "pred": 1}\n',
         "sa_p2.jsonl": '{"doc_id": 0, "lls": [-0.5, -2.0], "pred": 0}\n'}
    assert compare(a, dict(a)) == "byte-identical (2 sample files)"
    rounded = {**a, "sa_p1.jsonl": a["sa_p1.jsonl"].replace("-3.0", "-3.25")}
    assert compare(a, rounded) == "1 sample lines differ, 0 of them beyond their floats; largest float difference 0.25"
    flipped = {**a, "sa_p2.jsonl": '{"doc_id": 0, "lls": [-2.5, -2.0], "pred": 1}\n'}
    assert compare(a, flipped) == "1 sample lines differ, 1 of them beyond their floats; largest float difference 2"
    assert compare(a, {"sa_p1.jsonl": a["sa_p1.jsonl"]}) == "DIFFERENT files: ['sa_p2.jsonl']"
