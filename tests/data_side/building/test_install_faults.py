"""Issue 11, item 2: the build's final step is atomic for readers.

A build is killed (strace injects SIGKILL) at every rename, symlink, hard link and fsync
it makes, and run on a nearly full tmpfs; after each, ``--out`` must read as exactly the
previous build or exactly the new one (manifest and every file agreeing), and the next
run must remove what the killed one left.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from evalita_data.building.install import versions_dir
from evalita_data.registry import task_ids

from paths import TESTS

HERE = TESTS
STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install -y strace)")
FAULT_SYSCALLS = ("rename", "renameat", "renameat2", "symlink", "symlinkat", "link", "linkat", "fsync", "unlink", "unlinkat", "rmdir")


def build_cmd(raw: Path, out: Path, *tasks: str) -> list[str]:
    # One process: strace counts the n-th call of a syscall per process, and worker processes
    # (--workers, evalita_data/building/parallel.py) would split the calls the injection aims at.
    args = [sys.executable, "-m", "evalita_data.cli", "build", "--raw", str(raw), "--out", str(out), "--no-progress", "--workers", "1"]
    for t in tasks:
        args += ["--task", t]
    return args


def state(out: Path) -> bytes | None:
    """The manifest bytes, after checking that every task and file a reader sees agrees with it."""
    mpath = out / "manifest.json"
    if not mpath.exists():
        assert not any((out / t).is_dir() for t in task_ids()), "task folders without a manifest"
        return None
    data = mpath.read_bytes()
    manifest = json.loads(data)
    visible = {t for t in task_ids() if (out / t).is_dir()}
    assert visible == set(manifest["tasks"]), (visible, sorted(manifest["tasks"]))
    for task, entry in manifest["tasks"].items():
        files = {p.relative_to(out / task).as_posix() for p in (out / task).rglob("*.jsonl")}
        assert files == {s["file"] for s in entry["splits"].values()}, task
        for split in entry["splits"].values():
            assert hashlib.sha256((out / task / split["file"]).read_bytes()).hexdigest() == split["sha256"], (task, split)
    return data


def leftovers(out: Path) -> list[str]:
    """What is beside ``out`` besides the current version and the lock."""
    keep = {".lock", Path(os.readlink(out)).name if out.is_symlink() else None}
    extra = [p.name for p in versions_dir(out).iterdir() if p.name not in keep]
    return extra + [p.name for p in out.parent.glob(f".{out.name}.tmp-*")]


@pytest.fixture
def scenario(raw_copy, tmp_path: Path):
    """An old build (wic, ls) and the raw files of a new one (wic changed, te added, ls carried over)."""
    raw = raw_copy("wic", "te", "ls")
    out = tmp_path / "site" / "build"
    subprocess.run(build_cmd(raw, out, "wic", "ls"), check=True, capture_output=True)
    old = state(out)
    dev = raw / "wic" / "binary" / "dev.jsonl"
    dev.write_text("".join(dev.read_text("utf-8").splitlines(keepends=True)[:-1]), "utf-8")  # one record fewer
    shutil.copytree(tmp_path / "site", tmp_path / "pristine", symlinks=True)
    return raw, out, old, tmp_path


def fresh_site(tmp_path: Path) -> None:
    shutil.rmtree(tmp_path / "site")
    shutil.copytree(tmp_path / "pristine", tmp_path / "site", symlinks=True)


def syscall_counts(cmd: list[str], workdir: Path) -> dict[str, int]:
    log = workdir / f"strace-{uuid.uuid4().hex}.log"
    subprocess.run([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(FAULT_SYSCALLS), *cmd], check=True, capture_output=True)
    counts: dict[str, int] = {}
    for line in log.read_text().splitlines():
        name = line.split(None, 1)[1].split("(", 1)[0] if " " in line else ""
        if name in FAULT_SYSCALLS and "resumed>" not in line:
            counts[name] = counts.get(name, 0) + 1
    log.unlink()
    return counts


def kill_points(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Every rename, symlink, link and fsync; the first and last unlink/rmdir (cleanup is long)."""
    points = []
    for name, n in sorted(counts.items()):
        nth = range(1, n + 1) if name not in ("unlink", "unlinkat", "rmdir") else sorted({1, n})
        points += [(name, i) for i in nth]
    return points


@needs_strace
def test_kill_at_every_step_of_the_install_leaves_old_or_new(scenario) -> None:
    raw, out, old, tmp_path = scenario
    cmd = build_cmd(raw, out, "wic", "te")
    counts = syscall_counts(cmd, tmp_path)
    assert counts.get("rename", 0) + counts.get("renameat", 0) + counts.get("renameat2", 0) >= 1, counts
    new = state(out)
    assert new != old and set(json.loads(new)["tasks"]) == {"ls", "te", "wic"}
    seen = {"old": 0, "new": 0}
    for name, nth in kill_points(counts):
        fresh_site(tmp_path)
        proc = subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"inject={name}:signal=SIGKILL:when={nth}", *cmd],
                              capture_output=True, text=True)
        assert proc.returncode != 0, (name, nth, "the kill did not happen")
        got = state(out)
        assert got in (old, new), (name, nth)
        seen["old" if got == old else "new"] += 1
        # The next run removes what the killed one left and builds the same.
        again = subprocess.run(cmd, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert state(out) == new and leftovers(out) == [], (name, nth, leftovers(out))
    assert seen["old"] > 0 and seen["new"] > 0, seen  # kills before and after the switch were both tried


@needs_strace
def test_kill_while_replacing_an_older_layout_folder(raw_copy, tmp_path: Path) -> None:
    """A real folder written by evalita-data before the versioned layout is swapped in one step."""
    raw = raw_copy("wic")
    staged = tmp_path / "staged"
    subprocess.run(build_cmd(raw, staged, "wic"), check=True, capture_output=True)
    out = tmp_path / "site" / "build"
    shutil.copytree(staged, out)  # follows the link: a plain folder, as the old layout (other files are refused)
    old = state(out)
    shutil.copytree(tmp_path / "site", tmp_path / "pristine", symlinks=True)
    cmd = build_cmd(raw, out, "te") if (raw / "te").is_dir() else build_cmd(raw, out, "wic")
    counts = syscall_counts(cmd, tmp_path)
    new = state(out)
    assert out.is_symlink()
    for name, nth in kill_points({k: v for k, v in counts.items() if k.startswith(("rename", "symlink"))}):
        fresh_site(tmp_path)
        subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"inject={name}:signal=SIGKILL:when={nth}", *cmd],
                       capture_output=True)
        assert state(out) in (old, new), (name, nth)
        assert subprocess.run(cmd, capture_output=True).returncode == 0
        assert state(out) == new and leftovers(out) == []


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'mount failed'})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_leaves_the_old_build_and_says_so(small_tmpfs: Path, raw_copy) -> None:
    raw = raw_copy("wic", "te")
    out = small_tmpfs / "build"
    subprocess.run(build_cmd(raw, out, "wic"), check=True, capture_output=True)
    old = state(out)
    filler = small_tmpfs / "filler"
    cmd = build_cmd(raw, out, "wic", "te")
    outcomes = set()
    free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
    # Leave less and less room: the build fails at different points, or succeeds.
    for room in range(0, free, max(4096, free // 24)):
        filler.unlink(missing_ok=True)
        with open(filler, "wb") as fh:
            try:
                fh.write(b"\0" * max(0, free - room))
            except OSError:
                pass
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = state(out)
        if proc.returncode == 0:
            outcomes.add("new")
            assert got != old
            break
        outcomes.add("full")
        assert got == old
        assert "Traceback" not in proc.stderr and "no space left" in proc.stderr, proc.stderr
        assert leftovers(out) == []
    filler.unlink(missing_ok=True)
    assert "full" in outcomes
