"""`evalita-eval sweep`: two tiny models x two settings -> four run folders and one report, a line per
run as it is queued, starts and ends; a failed run is reported while the others go on, and the rerun
computes only the unfinished run. Killed (SIGKILL, with every Ray process it started) once one run is
complete and another half done, and rerun: only what was missing is computed, and the four results
equal those of a sweep never killed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from evalita_eval.running.identity import LOCKED, RUN_LOCK
from evalita_eval.sweep import CacheLines, run_one, standing
from evalita_eval.sweep_runs import load_sweep
from evalita_eval.sweep_runs import run_reservation

from paths import TEST_DATA

pytest.importorskip("ray")
DATA = TEST_DATA / "build"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from tiny_model import build_tiny_model

    return [build_tiny_model(tmp_path_factory.mktemp(f"tiny{seed}"), seed=seed) for seed in (0, 1)]


def _sweep_file(path: Path, models: list[Path], out: Path, bad_prompt: bool) -> Path:
    runs = [{"model": str(m), "setting": s, "output_dir": str(out / f"m{i}-{s}"), **({"prompts": "p9"} if bad_prompt and (i, s) == (1, "ce") else {})}
            for i, m in enumerate(models) for s in ("loglikelihood", "ce")]
    doc = {"defaults": {"data": str(DATA), "tasks": "te", "limit": 2, "batch_size": 2, "max_new_tokens": 2, "backend_args": {"gguf_file": "none"}},
           "runs": runs}
    path.write_text(json.dumps(doc), "utf-8")
    return path


def _sweep(file: Path, report: Path) -> subprocess.CompletedProcess:
    # Ray saves its login token under the home folder: a temporary one, so the test leaves nothing in ~.
    env = {**os.environ, "HOME": str(report.parent / "home")}
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "sweep", str(file), "--out", str(report)], capture_output=True, text=True, env=env)


def test_sweep_four_runs_one_report_and_resume(two_models: list[Path], tmp_path: Path) -> None:
    out, report = tmp_path / "runs", tmp_path / "report"
    first = _sweep(_sweep_file(tmp_path / "sweep.json", two_models, out, bad_prompt=True), report)
    assert first.returncode == 1 and "1 of 4 runs failed" in first.stderr, first.stdout + first.stderr
    assert "m1-ce: failed (exit 2)" in first.stdout  # reported; the three others went on
    for n, name in enumerate(["m0-loglikelihood", "m0-ce", "m1-loglikelihood", "m1-ce"], 1):
        said = [line for line in first.stdout.splitlines() if line.startswith(f"[{n}/4] ")]
        # Where each run stands, in order: queued, started (host, pid), ended.
        texts = [line.split(f" {name}: ", 1)[1] for line in said]
        assert texts[0] == f"queued -> {out / name} (log {report / 'logs' / f'{n}.log'})" and texts[1].startswith("started on "), said
        assert texts[-1].startswith("failed (exit 2)" if name == "m1-ce" else "complete (")
    done = {p.name: json.loads((p / "results.json").read_text("utf-8")) for p in sorted(out.iterdir()) if (p / "results.json").is_file()}
    assert sorted(done) == ["m0-ce", "m0-loglikelihood", "m1-loglikelihood"] and all(d["status"] == "complete" for d in done.values())
    assert done["m0-ce"]["config"]["setting"] == "ce" and done["m0-ce"]["results"]["te"]["p1"]["n"] == 2
    stamps = {name: (out / name / "results.json").stat().st_mtime_ns for name in done}
    second = _sweep(_sweep_file(tmp_path / "sweep.json", two_models, out, bad_prompt=False), report)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("already complete") == 3 and "m1-ce: complete" in second.stdout
    assert {name: (out / name / "results.json").stat().st_mtime_ns for name in done} == stamps  # not run again
    last = json.loads((out / "m1-ce" / "results.json").read_text("utf-8"))
    assert last["status"] == "complete" and last["config"]["setting"] == "ce" and last["model"]["name_or_path"] == str(two_models[1])
    assert "report of 4 runs" in second.stdout and (report / "report.md").is_file()
    assert json.loads((report / "report.json").read_text("utf-8"))  # one report of all four


def test_sweep_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {setting: ce}\n", "utf-8")
    with pytest.raises(ValueError, match=r"bad.yaml: run 1 is not a mapping with a model"):
        load_sweep(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text("- {model: org/a, data: d}\n- {model: org/a, data: d}\n", "utf-8")
    with pytest.raises(ValueError, match=r"twice.yaml: runs 1 and 2 are the same run \(the same keys\)"):
        load_sweep(twice)
    ok = tmp_path / "ok.yaml"
    ok.write_text("defaults: {data: d, backend: vllm, backend_args: {tensor_parallel_size: 4, data_parallel_size: 2}}\nruns:\n- {model: org/a, num_fewshot: 5}\n", "utf-8")
    (run,) = load_sweep(ok)
    assert run_reservation(run.spec, gpus_there=True) == {"num_cpus": 2, "num_gpus": 8}  # vllm: 4 x 2 GPUs
    assert run_reservation(run.spec, gpus_there=False) == {"num_cpus": 2, "num_gpus": 0}  # no GPU: vLLM's CPU build
    # hf without a device takes CUDA where there is one (run's default): it reserves it; --device cpu never does
    ok.write_text("- {model: org/a, data: d}\n", "utf-8")
    (hf,) = load_sweep(ok)
    assert run_reservation(hf.spec, gpus_there=True) == {"num_cpus": 1, "num_gpus": 1}
    assert run_reservation(hf.spec.model_copy(update={"device": "cpu"}), gpus_there=True)["num_gpus"] == 0
    assert run.output_dir is None and run.name == "org/a loglikelihood-5shot"
    assert run.spec.num_fewshot == 5 and run.spec.backend_args == {"tensor_parallel_size": 4, "data_parallel_size": 2}


def _load_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(ValueError) as err:
        load_sweep(path)
    return str(err.value)


@pytest.mark.parametrize("run, expected", [
    ("{name: x, model: m, limit: abc}", "run 2 (x): key limit: expected an integer, got 'abc'"),
    ("{model: m, limit: 2.5}", "run 2: key limit: expected a whole number, got 2.5"),
    ("{model: m, num_fewshot: -1}", "run 2: key num_fewshot: expected a number >= 0, got -1"),
    ("{model: m, backend: vllm, backend_args: {gpu_memory_utilization: lots}}",
     "run 2: key backend_args: --backend-arg gpu_memory_utilization (backend 'vllm'): expected a number, got 'lots'"),
    ("{model: m, gpu_memory_utilization: 0.5}", "run 2: key gpu_memory_utilization: --gpu-memory-utilization was removed: give "
     "--backend-arg gpu_memory_utilization=VALUE (in a file: backend_args: {gpu_memory_utilization: VALUE})"),
    ("{model: m, hub_org: org}", "run 2: key data: give exactly one of --data DIR or --hub-org ORG"),
    ("{model: m, fewshot_as_multiturn: true}",
     "run 2: key fewshot_as_multiturn: --fewshot-as-multiturn needs --apply-chat-template (as in lm-eval)"),
    ("{model: m, max_thinking_tokens: 8}", "run 2: key max_thinking_tokens: --max-thinking-tokens bounds a trace: it needs --thinking on"),
    ("{model: m, apply_chat_template: maybe}", "run 2: key apply_chat_template: expected true or false, got 'maybe'"),
    ("{model: m, setting: mc}", "run 2: key setting: expected one of loglikelihood, ce, ce-ni or oe, got 'mc'"),
    ("{model: m, dtype: float8}", "run 2: key dtype: expected one of auto, float32, float16 or bfloat16, got 'float8'"),
    ("{model: m, tasks: 3}", "run 2: key tasks: expected a list (or a comma-separated string), got 3"),
    ("{model: m, backend_args: [gguf_file]}", "run 2: key backend_args: expected a mapping of NAME: VALUE, got ['gguf_file']"),
    ("{model: m, backend_args: {gguf: x}}", "run 2: key backend_args: --backend-arg gguf: backend 'hf' has no such option (its options: gguf_file;"),
    ("{model: m, backend_args: {data_parallel_size: two}}", "run 2: key backend_args: --backend-arg data_parallel_size: expected an integer"),
    ("{model: m, batch_size: big}", "run 2: key batch_size: expected a positive integer or auto, got 'big'"),
    ("{model: m, limt: 3}", "run 2: unknown key 'limt' (did you mean limit?);"),
    ("{model: m, backend: nope}", "run 2: key backend: expected one of hf, openai-chat,"),
])
def test_a_bad_value_names_the_file_the_run_and_the_key(tmp_path: Path, run: str, expected: str) -> None:
    said = _load_error(tmp_path, f"defaults: {{data: d}}\nruns:\n- {{model: m, name: first}}\n- {run}\n")
    assert said.startswith(f"{tmp_path / 'sweep.yaml'}: {expected}"), said
    assert "\n" not in said


@pytest.mark.parametrize("entry, key, message", [
    ("{model: m, data: d, hub_org: org}", "data", "give exactly one of --data DIR or --hub-org ORG"),
    ("{model: m, data: d, fewshot_as_multiturn: true}", "fewshot_as_multiturn",
     "--fewshot-as-multiturn needs --apply-chat-template (as in lm-eval)"),
])
def test_a_sweep_entry_breaking_a_rule_is_refused_at_load_through_the_cli(tmp_path: Path, entry: str, key: str, message: str) -> None:
    file = tmp_path / "sweep.yaml"
    file.write_text(f"- {{model: m, data: d, name: fine}}\n- {entry}\n", "utf-8")
    said = _sweep(file, tmp_path / "report")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [f"Error: {file}: run 2: key {key}: {message}"], said.stderr
    assert said.stdout == "" and not (tmp_path / "report").exists()  # no run queued, nothing written


def test_runs_that_are_one_run_are_refused_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    same = _load_error(tmp_path, f"defaults: {{data: d}}\nruns:\n- {{model: m, output_dir: {tmp_path}/o/same}}\n- {{model: m, setting: ce, output_dir: {tmp_path}/o/x/../same}}\n")
    assert same == f"{tmp_path / 'sweep.yaml'}: runs 1 and 2 both write to {tmp_path / 'o' / 'same'}; give them different names, output_dir or keys"
    named = _load_error(tmp_path, "defaults: {data: d}\nruns:\n- {model: m, name: dup}\n- {model: m, limit: 3, name: dup}\n")
    assert named == f"{tmp_path / 'sweep.yaml'}: runs 1 and 2 are both named 'dup'; give them different names, output_dir or keys"
    keys = _load_error(tmp_path, "defaults: {data: d}\nruns:\n- {model: m, name: a, tasks: te}\n- {model: m, name: b, tasks: [te]}\n")
    assert keys == f"{tmp_path / 'sweep.yaml'}: runs 1 and 2 are the same run (the same keys); give them different names, output_dir or keys"


def test_standing_of_a_running_run(tmp_path: Path) -> None:
    cache = CacheLines(tmp_path / "cache.jsonl")
    assert standing(tmp_path, cache) == (0, "running: 0 requests saved")  # nothing written yet
    (tmp_path / "cache.jsonl").write_text('{"key": "a", "value": "x"}\n{"key": "b", "value": "y"}\n{"key": "c", "val', "utf-8")
    doc = {"format_version": 1, "status": "partial", "run_id": None, "run_identity": None, "model": {"name_or_path": "m"},
           "config": {}, "data": {}, "tasks": {"planned": ["te", "sa", "ls"]}, "results": {"te": {}, "sa": {}}}
    (tmp_path / "results.json").write_text(json.dumps(doc), "utf-8")
    assert standing(tmp_path, cache) == (2, "running: 2 of 3 tasks finished (te, sa), 2 requests saved")
    (tmp_path / "results.json").write_text(json.dumps({**doc, "results": {"te": {"p1": {"n": "1"}}}}), "utf-8")
    assert standing(tmp_path, cache) == (0, "running: 2 requests saved")  # not a results.json as documented: nothing believed
    with open(tmp_path / "cache.jsonl", "a", encoding="utf-8") as fh:
        fh.write('ue": "z"}\n')  # the cut line completed: counted once, from the bytes added
    assert cache.count() == 3
    (tmp_path / "results.json").write_text("{", "utf-8")  # caught mid-write: nothing finished yet, not an error
    assert standing(tmp_path, cache) == (0, "running: 3 requests saved")


def test_a_run_folder_in_use_is_not_run_twice(tiny_model: Path, tmp_path: Path) -> None:
    from filelock import FileLock

    folder = tmp_path / "run"
    folder.mkdir()
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"model": str(tiny_model), "data": str(DATA), "tasks": "wic", "limit": 1, "output_dir": str(folder)}), "utf-8")
    with FileLock(folder / RUN_LOCK):  # another sweep's run (or a `run`) holds the folder
        code, last, where = run_one(str(config), str(tmp_path / "run.log"), str(tmp_path))
    assert (code, last) == (LOCKED, f"Error: {folder} is being run by another process (another sweep or run): not started")
    assert where == str(folder) and not (folder / "cache.jsonl").exists() and not (folder / "results.json").exists()  # nothing computed


# ---------------------------------------------------------------- killed and rerun

# Every process the sweep starts (Ray's own, the runs) inherits this variable: the test finds them all by it.
MARK = "EVALITA_TEST_SWEEP"


def _processes(mark: str) -> list[int]:
    """Pids of the live processes whose environment holds MARK=mark (a zombie has no environment left)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            env = Path("/proc", entry, "environ").read_bytes() if entry.isdigit() else b""
        except OSError:  # gone, or not ours
            continue
        if f"{MARK}={mark}".encode() in env.split(b"\0"):
            pids.append(int(entry))
    return pids


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_stopped(pids: list[int], timeout_s: float = 10.0) -> None:
    """Until every process of ``pids`` is stopped (state T in /proc/PID/stat) or gone."""
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):  # gone
                break
            if state in ("T", "t", "Z", "X"):
                break
            time.sleep(0.001)


def _kill_everything(sweep: subprocess.Popen, mark: str) -> None:
    """SIGKILL the sweep's process group, then every process it started (Ray's are in other groups), by pid, until none is left."""
    try:
        os.killpg(sweep.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sweep.wait()
    while left := _processes(mark):
        _signal(left, signal.SIGKILL)
        time.sleep(0.01)


def _start_sweep(file: Path, report: Path, mark: str, ray_tmp: Path) -> subprocess.Popen:
    """The real CLI in its own process group, HOME and Ray's temporary folder in the test's folders (caches: conftest)."""
    env = {**os.environ, "HOME": str(report.parent / "home"), "RAY_TMPDIR": str(ray_tmp), MARK: mark}
    with open(report.parent / f"{mark}.out", "w", encoding="utf-8") as console:
        return subprocess.Popen([sys.executable, "-m", "evalita_eval.cli", "sweep", str(file), "--out", str(report)], env=env,
                                stdout=console, stderr=subprocess.STDOUT, start_new_session=True)


def _keys(out: Path) -> list[str]:
    """The keys of the whole lines of a run's cache.jsonl (a line cut by the kill is not one)."""
    keys = []
    for line in (out / "cache.jsonl").read_bytes().splitlines() if (out / "cache.jsonl").is_file() else []:
        try:
            keys.append(json.loads(line)["key"])
        except (ValueError, KeyError, TypeError):
            pass
    return keys


def _state(runs: Path, names: list[str]) -> dict[str, tuple[str | None, list[str]]]:
    """Per run: the status of its results.json (None: none yet) and its cache keys."""
    state = {}
    for name in names:
        try:
            status = json.loads((runs / name / "results.json").read_text("utf-8"))["status"]
        except (OSError, ValueError, KeyError):
            status = None
        state[name] = (status, _keys(runs / name))
    return state


def _total(name: str) -> int:
    """The requests of a run of _kill_file: te, 2 documents x 6 prompts x 2 choices; ce: x 2 prompts, generated."""
    return 4 if name.endswith("-ce") else 24


def _mid_sweep(state: dict[str, tuple[str | None, list[str]]]) -> bool:
    """One run complete, and another half done: some of its requests in its cache, not all."""
    return (any(s == "complete" for s, _ in state.values())
            and any(s != "complete" and 0 < len(keys) < _total(name) for name, (s, keys) in state.items()))


def _kill_mid_sweep(file: Path, runs: Path, names: list[str], report: Path, ray_tmp: Path) -> dict[str, tuple[str | None, list[str]]]:
    """Start the sweep, and SIGKILL it with everything it started once it is mid-sweep. The folders are
    polled; when they look mid-sweep, every process is stopped (SIGSTOP) and they are read again, so
    the state returned is the one the kill left (or, if a run moved on in between, all go on)."""
    mark = uuid.uuid4().hex
    sweep = _start_sweep(file, report, mark, ray_tmp)
    try:
        while True:
            assert sweep.poll() is None, "the sweep ended before it was seen mid-sweep: " + (report.parent / f"{mark}.out").read_text()
            if _mid_sweep(_state(runs, names)):
                frozen: list = []
                while new := [p for p in _processes(mark) if p not in frozen]:  # a process started meanwhile too
                    _signal(new, signal.SIGSTOP)
                    frozen += new
                _wait_stopped(frozen)  # SIGSTOP is asynchronous: a write under way when it was sent ends first
                state = _state(runs, names)
                if _mid_sweep(state):
                    return state
                _signal(frozen, signal.SIGCONT)
            time.sleep(0.01)
    finally:
        _kill_everything(sweep, mark)
        assert _processes(mark) == []


def _kill_file(path: Path, models: list[Path], out: Path) -> Path:
    """Two models x two settings: log-likelihood runs are quick, ce runs generate 128 tokens a request
    (4 requests, one a batch, each written to the cache as it ends): mid-sweep lasts for seconds."""
    runs = [{"model": str(m), "setting": s, "output_dir": str(out / f"m{i}-{s}")} for i, m in enumerate(models) for s in ("loglikelihood", "ce")]
    doc = {"defaults": {"data": str(DATA), "tasks": "te", "limit": 2, "batch_size": 1, "max_new_tokens": 128, "backend_args": {"gguf_file": "none"}},
           "runs": runs}
    path.write_text(json.dumps(doc), "utf-8")
    return path


def _finished_sweep(file: Path, report: Path, ray_tmp: Path) -> str:
    mark = uuid.uuid4().hex
    sweep = _start_sweep(file, report, mark, ray_tmp)
    try:
        sweep.wait()
    finally:
        _kill_everything(sweep, mark)  # nothing left running, whatever the sweep's end
    said = (report.parent / f"{mark}.out").read_text("utf-8")
    assert sweep.returncode == 0, said
    return said


def test_sweep_killed_mid_run_resumes_computing_only_what_was_missing(two_models: list[Path], tmp_path: Path) -> None:
    names = ["m0-loglikelihood", "m0-ce", "m1-loglikelihood", "m1-ce"]
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must stay short
    try:
        whole = tmp_path / "whole"
        _finished_sweep(_kill_file(tmp_path / "whole.json", two_models, whole), tmp_path / "whole-report", ray_tmp)
        runs = tmp_path / "runs"
        file = _kill_file(tmp_path / "sweep.json", two_models, runs)
        killed = _kill_mid_sweep(file, runs, names, tmp_path / "report", ray_tmp)
        complete = [n for n in names if killed[n][0] == "complete"]
        partial = [n for n in names if killed[n][0] != "complete" and 0 < len(killed[n][1]) < _total(n)]
        assert complete and partial, killed
        kept = {n: ((runs / n / "cache.jsonl").read_bytes(), (runs / n / "results.json").read_bytes()) for n in complete}
        said = _finished_sweep(file, tmp_path / "report", ray_tmp)
    finally:
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)
    for name in complete:  # not run again: nothing computed, nothing written
        assert f"{name}: already complete" in said
        assert ((runs / name / "cache.jsonl").read_bytes(), (runs / name / "results.json").read_bytes()) == kept[name]
    for name in names:
        keys = _keys(runs / name)
        assert len(keys) == len(set(keys)), f"{name}: a request computed twice"
        if name in complete:
            continue
        before = set(killed[name][1])
        assert before <= set(keys) and len(keys) == _total(name)
        # The rerun's own count (its last line in the run's console): only what the cache lacked was computed.
        log = tmp_path / "report" / "logs" / f"{names.index(name) + 1}.log"
        counts = re.findall(r"(\d+) requests computed, (\d+) read from the cache", log.read_text("utf-8"))
        assert counts and tuple(map(int, counts[-1])) == (len(keys) - len(before), len(before)), (name, counts, len(before))
    assert "report of 4 runs" in said and (tmp_path / "report" / "report.json").is_file()
    for name in names:  # the same numbers and samples as the sweep never killed
        ours, theirs = (json.loads((folder / name / "results.json").read_text("utf-8")) for folder in (runs, whole))
        assert ours["status"] == "complete" and ours["results"] == theirs["results"] and ours["results"]["te"]
        assert _samples(runs / name) == _samples(whole / name)


def _samples(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "samples").iterdir())}


def test_complete_means_the_recorded_identity_is_the_runs() -> None:
    from evalita_eval.record import RecordError, parse_record
    from evalita_eval.run_config import build_spec
    from evalita_eval.running.identity import run_id
    from evalita_eval.sweep_runs import entry_identity, identity_difference

    def record(**changed):  # a checked record of a results.json holding ``changed`` (its samples not read)
        doc = {"format_version": 1, "status": "complete", "run_identity": identity, "run_id": run_id(identity),
               "model": {"name_or_path": "org/a"}, "config": {}, "data": {}, "results": {"te": {}}, **changed}
        return parse_record(Path("r/results.json"), doc, partial=True, samples=False)

    spec = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "backend_args": {"gguf_file": "none"}}, "s.yaml: run 1")[0]
    identity = {**entry_identity(spec), "chat_template": None,
                "model": {"name_or_path": "org/a", "revision": None, "backend": "hf", "dtype": "float32", "gguf_file": None}}
    assert identity_difference(record(), spec) is None
    assert identity_difference(record(status="partial"), spec) == "not complete"
    assert identity_difference(record(results={}), spec) == "tasks te not evaluated"
    with pytest.raises(RecordError, match=f"key run_identity: hashes to {run_id(identity)}, not to the run id 0000000000"):
        record(run_id="0" * 10)  # the reader re-hashes the identity: an edited one is never a finished run
    assert identity_difference(record(run_identity=None, run_id=None), spec) == "no run identity"
    edited = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 3}, "s.yaml: run 1")[0]
    assert identity_difference(record(), edited) == "limit: 2 in the folder, 3 here"
    other = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "backend_args": {"gguf_file": "x.gguf"}}, "s.yaml: run 1")[0]
    assert identity_difference(record(), other) == 'model.gguf_file: null in the folder, "x.gguf" here'
    assert identity_difference(record(), build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "dtype": "bfloat16"}, "s")[0]) == (
        'model.dtype: "float32" in the folder, "bfloat16" here')
    # Thinking and the BERTScore scorer change numbers: recorded on one side only, or with another budget, they differ.
    thinking = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "thinking": "on", "max_thinking_tokens": 8,
                           "backend_args": {"gguf_file": "none"}}, "s")[0]
    assert identity_difference(record(), thinking).startswith('thinking: null in the folder, {"max_thinking_tokens": 8, "on": true, ')
    identity = {**entry_identity(thinking), "chat_template": None, "model": identity["model"]}
    assert identity_difference(record(), thinking) is None
    assert identity_difference(record(), spec).startswith('thinking: {"max_thinking_tokens": 8, "on": true, ')  # on in the folder, off here
    longer = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "thinking": "on", "max_thinking_tokens": 16,
                         "backend_args": {"gguf_file": "none"}}, "s")[0]
    assert identity_difference(record(), longer) == "thinking.max_thinking_tokens: 8 in the folder, 16 here"
    scored = build_spec({"model": "org/a", "data": "d", "tasks": "te", "limit": 2, "bertscore_model": "org/bert", "backend_args": {"gguf_file": "none"}}, "s")[0]
    identity = {**entry_identity(scored), "chat_template": None, "model": identity["model"]}
    assert identity_difference(record(), spec) == 'bertscore_model: "org/bert" in the folder, null here'
