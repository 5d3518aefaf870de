#!/usr/bin/env python3
"""Bad-input probe of both command-line tools (issue 11): every case must fail with one clear line.

Runs each case in a fresh copy of the committed samples, as a user would (subprocess), and
counts: bad inputs tried / clear one-line errors / tracebacks / outputs intact / silent drops.
A "silent drop" is a bad input that exits 0. "Outputs intact" means the previous build (and
the raw inputs) are byte for byte as before the failing command. Exit status 1 if any case
gives a traceback, a silent drop or a damaged output.

Then the server faults (issue 22): ``evalita-eval run --backend openai-completions|openai-chat``
against a fake server on 127.0.0.1 (tests/fake_openai_server.py) that lies in each way it knows,
for good (the run must stop with one line naming the server, keeping nothing of the lie) and
once (the retry must give a run equal to a clean one). Counts: faults tried / clean one-line
errors / retried-and-equal / secrets leaked / hangs / wrong scores.

    python scripts/probe_integrity.py [--keep DIR] [--server]   (--server: the server faults only)
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "raw"
PY = sys.executable


def digest(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def data(*args: object) -> list[str]:
    return [PY, "-m", "evalita_data.cli", *map(str, args)]


def evaluate(*args: object) -> list[str]:
    return [PY, "-m", "evalita_eval.cli", *map(str, args)]


class Probe:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.rows: list[tuple[str, str]] = []
        self.counts = {"tried": 0, "one_line": 0, "tracebacks": 0, "intact": 0, "silent_drops": 0, "damaged": 0}
        self.env = {**os.environ, "HF_HOME": str(work / "hf"), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(work / "xdg")}

    def fresh(self, name: str, *tasks: str) -> tuple[Path, Path]:
        """A raw copy of some tasks and a previous build of them."""
        case = self.work / name
        raw = case / "raw"
        for t in tasks:
            shutil.copytree(SAMPLES / t, raw / t)
        raw.mkdir(parents=True, exist_ok=True)
        out = case / "build"
        if tasks:
            subprocess.run(data("build", "--raw", raw, "--out", out, "--no-progress"), check=True, capture_output=True, env=self.env)
        return raw, out

    def case(self, name: str, cmd: list[str], watch: list[Path], env: dict | None = None) -> None:
        before = [digest(p) for p in watch]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**self.env, **(env or {})})
        text = proc.stdout + proc.stderr
        # "error: ..." lines, or validate's "<file>:<line>: <problem>" lines.
        errors = [ln for ln in text.splitlines() if ln.lower().startswith("error") or ln.startswith(str(self.work))]
        self.counts["tried"] += 1
        if "Traceback" in text:
            self.counts["tracebacks"] += 1
            verdict = "TRACEBACK"
        elif proc.returncode == 0:
            self.counts["silent_drops"] += 1
            verdict = "EXIT 0"
        elif errors:
            self.counts["one_line"] += 1
            verdict = "ok"
        else:
            verdict = "no error line"
        if [digest(p) for p in watch] == before:
            self.counts["intact"] += 1
        else:
            self.counts["damaged"] += 1
            verdict += " + OUTPUT CHANGED"
        self.rows.append((name, f"{verdict:<10} rc={proc.returncode} {errors[0] if errors else text.strip().splitlines()[-1:]}"))


def break_file(path: Path, how: str) -> None:
    if how == "empty":
        path.write_bytes(b"")
    elif how == "header":
        path.write_text(path.read_text("utf-8").splitlines()[0] + "\n", "utf-8")
    elif how == "latin1":
        path.write_bytes(path.read_bytes().replace("à".encode(), b"\xe0", 1) + b"\xe0")
    elif how == "dupkey":
        lines = path.read_text("utf-8").splitlines()
        key, value = list(json.loads(lines[1]).items())[-1]
        lines[1] = lines[1][:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}"
        path.write_text("\n".join(lines) + "\n", "utf-8")
    elif how == "garbage":
        path.write_bytes(b"PK\x03\x04garbage")
    elif how == "sheet":
        with zipfile.ZipFile(path) as z:
            parts = {n: z.read(n) for n in z.namelist()}
        sheet = next(n for n in parts if n.startswith("xl/worksheets/sheet"))
        parts[sheet] = b"<worksheet><sheetData><row r='1'><c r='A1' t='n'><v>x</v></c></row>"
        with zipfile.ZipFile(path, "w") as z:
            for n, d in parts.items():
                z.writestr(n, d)


def files_of(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text("utf-8", "replace") for p in sorted(folder.rglob("*")) if p.is_file()}


def kept_only_truth(got: dict[str, str], clean: dict[str, str]) -> bool:
    """What a stopped run kept is what the clean run says: cache lines, sample files, finished tasks."""
    if not set(got.get("cache.jsonl", "").splitlines()) <= set(clean["cache.jsonl"].splitlines()):
        return False
    if any(name.startswith("samples/") and text != clean.get(name) for name, text in got.items()):
        return False
    if "results.json" in got:
        doc, ref = json.loads(got["results.json"]), json.loads(clean["results.json"])["results"]
        return doc["status"] == "partial" and all(ref.get(t) == v for t, v in doc["results"].items())
    return True


def equal_runs(got: dict[str, str], clean: dict[str, str]) -> bool:
    if got.keys() != clean.keys() or sorted(got["cache.jsonl"].splitlines()) != sorted(clean["cache.jsonl"].splitlines()):
        return False
    a, b = json.loads(got["results.json"]), json.loads(clean["results.json"])
    return (a["status"], a["results"]) == (b["status"], b["results"]) and all(
        got[n] == clean[n] for n in got if n.startswith("samples/"))


def probe_server(work: Path, model: Path, env: dict[str, str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Every lie of the fake server, for good and once, through ``evalita-eval run`` in a subprocess."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_openai_server import ALL_FAULTS, CHAT_FAULTS, FAULTS_NOT_RETRIED, FakeServer

    key = "sk-probe-" + secrets.token_hex(16)
    env = {**env, "EVALITA_PROBE_KEY": key}
    server, elsewhere = FakeServer(), FakeServer()
    server.redirect_to = elsewhere.url + "/completions"
    server.huge_bytes = 65 * 2**20  # over the client's 64 MiB bound
    counts = {"tried": 0, "one_line": 0, "retried_equal": 0, "leaked": 0, "hangs": 0, "wrong": 0}
    rows: list[tuple[str, str]] = []

    def run(out: Path, backend: str, *extra: str) -> tuple[subprocess.CompletedProcess | None, dict[str, str]]:
        tasks = "sum" if backend == "openai-chat" else "te,sum"
        cmd = evaluate("run", "--model", model, "--data", ROOT / "tests" / "data" / "build", "--tasks", tasks, "--limit", "2",
                       "--max-new-tokens", "4", "--backend", backend, "--backend-arg", f"base_url={server.url}", "--backend-arg", "api_key_env=EVALITA_PROBE_KEY",
                       "--batch-size", "2", "--backend-arg", "concurrency=2", "--backend-arg", "timeout_s=2", "--output-dir", out, "--no-progress", *extra)
        try:
            proc: subprocess.CompletedProcess | None = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        except subprocess.TimeoutExpired:
            proc = None
        return proc, files_of(out) if out.exists() else {}

    def leaked(proc: Any, files: dict[str, str]) -> bool:
        text = (proc.stdout + proc.stderr if proc else "") + "".join(files.values())
        return any(key[i : i + 8] in text for i in range(len(key) - 7)) or any(auth for _, auth, _ in elsewhere.seen)

    try:
        clean = {}
        for backend in ("openai-completions", "openai-chat"):
            proc, clean[backend] = run(work / "server" / f"clean-{backend}", backend)
            assert proc is not None and proc.returncode == 0, proc and proc.stdout + proc.stderr
        for fault in ALL_FAULTS:
            backend = "openai-chat" if fault in CHAT_FAULTS else "openai-completions"
            modes = [("for good", 2, None, "1")] + ([("once", 1, 1, "2")] if fault not in FAULTS_NOT_RETRIED else [])
            for mode, first, count, retries in modes:
                server.lie(fault, first, count)
                # The bound, not the deadline, must stop a huge body: time enough to send 64 MiB on a loaded machine.
                timeout = ["--backend-arg", "timeout_s=60"] if fault.startswith("huge") else []
                proc, got = run(work / "server" / f"{fault}-{mode.replace(' ', '-')}", backend, "--backend-arg", f"max_retries={retries}", *timeout)
                counts["tried"] += 1
                if proc is None:
                    counts["hangs"] += 1
                    rows.append((f"server {fault} ({mode})", "HANG"))
                    continue
                counts["leaked"] += leaked(proc, got)
                errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("Error:")]
                if mode == "once":
                    ok = proc.returncode == 0 and equal_runs(got, clean[backend])
                    counts["retried_equal"] += ok
                    counts["wrong"] += not ok and proc.returncode == 0
                    verdict = "retried, equal" if ok else f"rc={proc.returncode} {'DIFFERENT' if proc.returncode == 0 else errors[-1:]}"
                else:
                    ok = (proc.returncode == 1 and "Traceback" not in proc.stderr and len(errors) == 1
                          and f"server {server.url}" in errors[0])
                    truthful = proc.returncode != 0 and kept_only_truth(got, clean[backend])
                    counts["one_line"] += ok and truthful
                    counts["wrong"] += not truthful
                    verdict = ("ok" if ok and truthful else "WRONG") + f" rc={proc.returncode} {(errors or ['(no error line)'])[0][:150]}"
                rows.append((f"server {fault} ({mode})", verdict))
    finally:
        server.stop()
        elsewhere.stop()
    return counts, rows


def tiny_model(work: Path, env: dict[str, str]) -> Path:
    model = work / "tiny"
    if not model.exists():
        subprocess.run([PY, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); from tiny_model import build_tiny_model; build_tiny_model({str(model)!r})"], check=True,
                       capture_output=True, env=env)
    return model


def main() -> int:
    args = sys.argv[1:]
    keep = Path(args[args.index("--keep") + 1]) if "--keep" in args else None
    work = Path(tempfile.mkdtemp(prefix="evalita-probe-", dir=keep))
    p = Probe(work)
    status = 0
    if "--server" not in args:
        status = probe_inputs(p)
    counts, rows = probe_server(work, tiny_model(work, p.env), p.env)
    for name, verdict in rows:
        print(f"{name:<44} {verdict}")
    print(f"\nserver faults tried: {counts['tried']} / clean one-line errors: {counts['one_line']} / retried-and-equal: "
          f"{counts['retried_equal']} / secrets leaked: {counts['leaked']} / hangs: {counts['hangs']} / wrong scores: {counts['wrong']}")
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    if counts["leaked"] or counts["hangs"] or counts["wrong"] or counts["one_line"] + counts["retried_equal"] != counts["tried"]:
        status = 1
    return status


def probe_inputs(p: Probe) -> int:
    """The bad inputs of issue 11 (build, validate, push, card, run, report)."""
    work = p.work

    # -- build: inputs read-only, wrong folders
    raw, out = p.fresh("overlap", "wic")
    p.case("build --out = --raw", data("build", "--raw", raw, "--out", raw), [raw, out])
    p.case("build --out inside --raw", data("build", "--raw", raw, "--out", raw / "wic" / "o"), [raw, out])
    p.case("build --out contains --raw", data("build", "--raw", raw, "--out", raw.parent), [raw, out])
    p.case("build --raw raw/wic", data("build", "--raw", raw / "wic", "--out", out), [raw, out])
    (work / "empty-raw").mkdir()
    p.case("build --raw (empty folder)", data("build", "--raw", work / "empty-raw", "--out", out), [raw, out])
    p.case("build --raw (missing)", data("build", "--raw", work / "nope", "--out", out), [raw, out])
    p.case("build --task (unknown)", data("build", "--raw", raw, "--out", out, "--task", "xx"), [raw, out])

    # -- build: broken originals (the previous build must stay)
    for task, name, how in [
        ("wic", "binary/train.jsonl", "empty"), ("wic", "binary/dev.jsonl", "dupkey"), ("sa", "sentipolc16_officialdistrib_train.csv", "header"),
        ("sa", "sentipolc16_gold2000.csv", "empty"), ("ner", "FIC_train.tsv", "empty"), ("ner", "ADG_dev.tsv", "latin1"),
        ("hs", "haspeede2_dev_taskAB.tsv", "header"), ("hs", "haspeede2_dev_taskAB.tsv", "empty"), ("at", "SSM_2017.xlsx", "garbage"),
        ("at", "SSM_2017.xlsx", "empty"), ("at", "SSM_2017.xlsx", "sheet"), ("te", "EVALITA2009_RTE_test.xml", "header"),
        ("te", "EVALITA2009_RTE_dev.xml", "empty"), ("faq", "faqs_uft8_QA.csv", "header"), ("rel", "training.txt", "empty"),
        ("sum", "fanpage.csv", "header"), ("ls", "trial/lexsub_trial.xml", "empty"),
    ]:
        raw, out = p.fresh(f"{task}-{how}-{name.replace('/', '_')}", task)
        if not (raw / task / name).exists():
            continue
        break_file(raw / task / name, how)
        p.case(f"build: {task}/{name} {how}", data("build", "--raw", raw, "--out", out, "--task", task, "--no-progress"), [out])

    # -- validate
    raw, out = p.fresh("validate", "te")
    bad = work / "validate" / "te" / "bad.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text((out / "te" / "test.jsonl").read_text("utf-8").splitlines()[0] + "\n{not json\n", "utf-8")
    p.case("validate bad.jsonl", data("validate", bad), [out])
    dup = bad.with_name("dup.jsonl")
    shutil.copy(out / "te" / "test.jsonl", dup)
    break_file(dup, "dupkey")
    p.case("validate duplicate key", data("validate", dup), [out])
    empty = bad.with_name("test.jsonl")
    empty.write_text("")
    p.case("validate empty split file", data("validate", empty), [out])
    p.case("validate (no task in path)", data("validate", work / "validate" / "raw" / "te" / "EVALITA2009_RTE_dev.xml"), [out])

    # -- push / card
    p.case("push --to-dir = --build", data("push", "--build", out, "--to-dir", out), [out])
    p.case("push --to-dir inside --build", data("push", "--build", out, "--to-dir", out / "te" / "x"), [out])
    p.case("push --org ../../x --to-dir", data("push", "--build", out, "--org", "../../x", "--to-dir", work / "hub"), [out])
    p.case("push --org ../../x", data("push", "--build", out, "--org", "../../x", "--dry-run"), [out])
    p.case("push --build (no manifest)", data("push", "--build", work / "empty-raw", "--to-dir", work / "hub2"), [out])
    p.case("card --build (no manifest)", data("card", "te", "--build", work / "empty-raw"), [out])
    evil = work / "evil"
    shutil.copytree(out, evil)  # a plain copy whose manifest can be edited
    m = json.loads((evil / "manifest.json").read_text("utf-8"))
    m["tasks"]["te"]["splits"]["../../../x"] = dict(m["tasks"]["te"]["splits"]["test"], file="../../../x.jsonl")
    (evil / "manifest.json").write_text(json.dumps(m), "utf-8")
    p.case("push manifest split ../../../x", data("push", "--build", evil, "--to-dir", work / "a" / "b" / "hub"), [out, work / "a"])
    del m["tasks"]["te"]["splits"]["../../../x"]
    m["tasks"]["../x"] = m["tasks"]["te"]
    (evil / "manifest.json").write_text(json.dumps(m), "utf-8")
    p.case("push manifest task ../x", data("push", "--build", evil, "--to-dir", work / "hub3"), [out, work / "hub3"])

    # -- evaluate
    model = tiny_model(work, p.env)
    raw, out = p.fresh("eval", "te", "rel", "hs")
    res = work / "eval" / "res"
    common = ["--output-dir", res, "--limit", "2", "--no-progress"]
    p.case("run --model (missing)", evaluate("run", "--model", work / "no-model", "--data", out, *common), [out])
    p.case("run --model (a folder, not a model)", evaluate("run", "--model", raw, "--data", out, "--tasks", "te", *common), [out])
    p.case("run --data raw", evaluate("run", "--model", model, "--data", raw, *common), [out])
    p.case("run --data (empty folder)", evaluate("run", "--model", model, "--data", work / "empty-raw", *common), [out])
    p.case("run --tasks rel (no test)", evaluate("run", "--model", model, "--data", out, "--tasks", "rel", *common), [out])
    p.case("run --tasks hs (no test)", evaluate("run", "--model", model, "--data", out, "--tasks", "hs", *common), [out])
    p.case("run --tasks xx", evaluate("run", "--model", model, "--data", out, "--tasks", "xx", *common), [out])
    p.case("run --prompts p9", evaluate("run", "--model", model, "--data", out, "--tasks", "te", "--prompts", "p9", *common), [out])
    p.case("run --hub-org offline", evaluate("run", "--model", model, "--hub-org", "evalita-llm", "--tasks", "te", *common), [out])
    p.case("run --hub-org unreachable", evaluate("run", "--model", model, "--hub-org", "evalita-llm", "--tasks", "te", *common), [out],
           env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    tampered = work / "tampered"
    shutil.copytree(out, tampered)
    split = tampered / "te" / "test.jsonl"
    split.write_text(split.read_text("utf-8").replace("a", "e", 1), "utf-8")
    p.case("run on data changed after the build", evaluate("run", "--model", model, "--data", tampered, "--tasks", "te", *common), [out])
    ok = subprocess.run(evaluate("run", "--model", model, "--data", out, "--tasks", "te", "--prompts", "p1", *common), capture_output=True, env=p.env)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads((res / "results.json").read_text("utf-8"))
    doc["status"] = "partial"
    (res / "partial.json").write_text(json.dumps(doc), "utf-8")
    p.case("report on a partial run", evaluate("report", res / "partial.json", "--out", work / "rep", "--bootstrap", "0"), [out])
    (res / "junk.json").write_text("{not json", "utf-8")
    p.case("report on a broken results.json", evaluate("report", res / "junk.json", "--out", work / "rep"), [out])
    cache = res / "cache.jsonl"
    lines = cache.read_text("utf-8").splitlines()
    lines[0] = json.dumps({"key": json.loads(lines[0])["key"], "value": None})
    cache.write_text("\n".join(lines) + "\n", "utf-8")
    rerun = subprocess.run(evaluate("run", "--model", model, "--data", out, "--tasks", "te", "--prompts", "p1", *common), capture_output=True,
                           text=True, env=p.env)
    p.rows.append(("run with a null cache value (must succeed)", f"rc={rerun.returncode} {rerun.stdout.strip().splitlines()[-1][:90]}"))

    # -- a full disk (needs root for a small tmpfs)
    mnt = work / "tmpfs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], capture_output=True).returncode == 0:
        try:
            shutil.copytree(SAMPLES / "wic", mnt / "raw" / "wic")
            subprocess.run(data("build", "--raw", mnt / "raw", "--out", mnt / "build"), capture_output=True, env=p.env)
            (mnt / "filler").write_bytes(b"\0" * (os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize - 8192))
            p.case("build on a full disk", data("build", "--raw", mnt / "raw", "--out", mnt / "build", "--no-progress"), [mnt / "build", mnt / "raw"])
        finally:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)

    for name, verdict in p.rows:
        print(f"{name:<44} {verdict}")
    c = p.counts
    print(f"\nbad inputs tried: {c['tried']} / clear one-line errors: {c['one_line']} / tracebacks: {c['tracebacks']} / "
          f"outputs intact: {c['intact']} / silent drops: {c['silent_drops']}\n")
    p.rows.clear()
    return 1 if c["tracebacks"] or c["silent_drops"] or c["damaged"] or c["one_line"] != c["tried"] else 0


if __name__ == "__main__":
    sys.exit(main())
