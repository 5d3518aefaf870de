"""The run's requests as one stream (running/stream.py): the same samples and scores, byte for
byte, as a run that calls the backend once per task and prompt in turn; the calls a backend gets
(each prompt alone on hf, the whole run where the engine mixes prompts); the time of a shared call
split by prompt tokens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner

from evalita_eval.api import BackendOptions, GenRequest, LLRequest
from evalita_eval.backends import create_backend
from evalita_eval.cli import main
from evalita_eval.running.plan import RunPlan
from evalita_eval.running.runner import ModelInfo, Runner
from evalita_eval.run_config import RunSpec
from evalita_eval.running.stream import RunStream
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource

from paths import TEST_DATA

DATA = TEST_DATA / "build"
TASKS = ["te", "sa", "ls"]  # two MC tasks (log-likelihoods) and a generative one
PROMPTS = ["p1", "p2"]


def _run(model: Path, out: Path, tasks: list[str], prompts: list[str]) -> tuple[dict, str]:
    args = ["run", "--model", str(model), "--data", str(DATA), "--tasks", ",".join(tasks), "--prompts", ",".join(prompts),
            "--num-fewshot", "1", "--limit", "4", "--batch-size", "2", "--max-new-tokens", "6", "--no-progress", "--output-dir", str(out)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "results.json").read_text("utf-8")), result.output


def _computed(console: str) -> int:
    return int(console.split(" requests computed")[0].rsplit("\n", 1)[-1])


def test_one_stream_equals_one_call_per_task_and_prompt(tiny_model: Path, tmp_path: Path) -> None:
    stream, console = _run(tiny_model, tmp_path / "stream", TASKS, PROMPTS)
    # Today's path, call by call: one invocation per task and prompt, in the run's order, each
    # starting from the resume cache the previous one left (a request an earlier prompt sent is
    # read back, as within one run).
    cache, computed = None, 0
    for task in TASKS:
        for prompt in PROMPTS:
            out = tmp_path / f"{task}-{prompt}"
            out.mkdir()
            if cache is not None:
                shutil.copy(cache, out / "cache.jsonl")
            alone, alone_console = _run(tiny_model, out, [task], [prompt])
            computed += _computed(alone_console)
            cache = out / "cache.jsonl"
            assert alone["results"][task][prompt] == stream["results"][task][prompt]
            name = f"{task}_{prompt}.jsonl"
            # Byte for byte but the run id each sample carries (the two runs ask different tasks).
            alone_bytes = (out / "samples" / name).read_bytes().replace(alone["run_id"].encode(), stream["run_id"].encode())
            assert alone["run_id"] != stream["run_id"] and alone_bytes.count(stream["run_id"].encode()) == len(alone_bytes.splitlines())
            assert alone_bytes == (tmp_path / "stream" / "samples" / name).read_bytes()
    assert _computed(console) == computed > 0  # every request computed once, in both
    assert stream["status"] == "complete" and list(stream["results"]) == TASKS
    assert sorted(p.name for p in (tmp_path / "stream" / "samples").iterdir()) == sorted(f"{t}_{p}.jsonl" for t in TASKS for p in PROMPTS)


class _Recorder:
    """Records the requests of every backend call (generations streamed: takes on_result)."""

    def __init__(self, backend) -> None:
        self.backend, self.calls = backend, []
        plain_ll, plain_gen = backend.loglikelihood, backend.generate_until

        def loglikelihood(requests):
            self.calls.append(("ll", len(requests), {r.context.split("\n")[0] for r in requests}))
            return plain_ll(requests)

        def generate_until(requests, on_result=None):
            self.calls.append(("gen", len(requests), {r.context.split("\n")[0] for r in requests}))
            return plain_gen(requests, on_result)

        backend.loglikelihood, backend.generate_until = loglikelihood, generate_until


def _stream_calls(model: Path, out: Path, mixes: bool) -> list[tuple[str, int]]:
    """The (kind, requests) of every backend call of a run of TASKS x PROMPTS on ``model``."""
    backend = create_backend("hf", BackendOptions(str(model), dtype="float32", batch_size=2))
    recorder = _Recorder(backend)
    backend.mixes_prompts = mixes
    config = RunSpec(model="m", data="data", limit=3, batch_size=2, prompts=PROMPTS, max_new_tokens=4, progress=False)
    runner = Runner(backend, ModelInfo(str(model), None, "float32", "hf"), FolderSource(str(DATA)), config, out)
    result = runner.run(select_entries(TASKS))
    assert result.record.status == "complete" and result.computed == sum(n for _, n, _ in recorder.calls)
    return [(kind, n) for kind, n, _ in recorder.calls]


def test_hf_gets_each_prompt_alone_and_a_mixing_engine_the_whole_run(tiny_model: Path, tmp_path: Path) -> None:
    # The requests of each prompt, from the plan (no request repeats within or across these prompts).
    runner = Runner(create_backend("hf", BackendOptions(str(tiny_model), dtype="float32", batch_size=2)),
                    ModelInfo(str(tiny_model), None, "float32", "hf"), FolderSource(str(DATA)),
                    RunSpec(model="m", data="data", limit=3, batch_size=2, prompts=PROMPTS, max_new_tokens=4, progress=False), tmp_path / "plan")
    plan = runner.plan(select_entries(TASKS))
    per_prompt = [(p.kind, len(p.requests)) for e in plan.entries.values() for p in e.prompts]
    assert len(per_prompt) == 6 and len({r for e in plan.entries.values() for p in e.prompts for r in p.requests}) == sum(n for _, n in per_prompt)
    step = 2 * 4  # batch size x 4 requests per log-likelihood call
    want = []
    for kind, n in per_prompt:
        want += [("ll", min(step, n - s)) for s in range(0, n, step)] if kind == "loglikelihood" else [("gen", n)]
    assert _stream_calls(tiny_model, tmp_path / "each", mixes=False) == want
    # An engine that mixes prompts (vllm): its log-likelihoods cut across prompts and tasks, its
    # (streamed) generations in one call.
    ll = sum(n for kind, n in per_prompt if kind == "loglikelihood")
    gen = sum(n for kind, n in per_prompt if kind == "generate_until")
    mixed = [("ll", min(step, ll - s)) for s in range(0, ll, step)] + [("gen", gen)]
    assert _stream_calls(tiny_model, tmp_path / "mixed", mixes=True) == mixed


def test_a_shared_call_is_timed_by_prompt_tokens() -> None:
    runner = SimpleNamespace(_counts={}, backend=SimpleNamespace(tokenizer=None))
    stream = RunStream(runner, RunPlan(None, []))  # type: ignore[arg-type]  (no selection: nothing is planned)
    # No tokenizer: characters / 4, rounded up. a: 8 + 4 characters (2 + 1 tokens); b: 20 (5 tokens).
    lls = [LLRequest("x" * 8, "yyyy"), LLRequest("z" * 20, "")]
    stream._attribute("loglikelihood", lls, ["a", "b"], 8.0)
    assert dict(stream.seconds) == {"a": 8.0 * 3 / 8, "b": 8.0 * 5 / 8}
    # Generations: the context only.
    stream._attribute("generate_until", [GenRequest("w" * 4, ("\n",), 10), GenRequest("v" * 12, ("\n",), 10)], ["b", "c"], 4.0)
    assert dict(stream.seconds) == {"a": 3.0, "b": 5.0 + 1.0, "c": 3.0}
