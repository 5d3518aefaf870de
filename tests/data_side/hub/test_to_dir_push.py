"""`evalita-data push --to-dir` over an earlier push, through the real CLI: its files listed as the Hub push lists
them (new, changed, unchanged, kept), and a file of the folder that differs from the build (edited by hand, or an
older build's) refuses the push before anything is written, naming the file; a split file of the build that is a
link leaving it is one line naming the file, for `validate` and `push` alike."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from publish_fixtures import run_cli, sample_build, shrink_split  # noqa: F401 - fixture

ENV = dict(os.environ)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _listed(stdout: str) -> dict[str, str]:
    """path -> status of the push's file lines."""
    return {line.split()[-1] if "(not from" not in line else line.split()[1]: line.split()[0]
            for line in stdout.splitlines() if line.startswith("  ")}


def test_a_push_to_a_folder_lists_its_files_and_never_overwrites_a_file_that_differs(sample_build: Path, tmp_path: Path) -> None:
    build, dest = tmp_path / "build", tmp_path / "pub"
    shutil.copytree(sample_build, build)
    args = ["push", "--build", str(build), "--layout", "official", "--to-dir", str(dest), "--task", "te"]
    first = run_cli(args, ENV)
    assert first.returncode == 0, first.stderr
    (folder,) = dest.iterdir()
    pushed = _tree(folder)
    assert _listed(first.stdout) == dict.fromkeys(pushed, "new") and len(pushed) >= 4
    again = run_cli(args, ENV)
    assert again.returncode == 0 and _listed(again.stdout) == dict.fromkeys(pushed, "unchanged")
    assert f"{folder}: writing 0 of {len(pushed)} file(s), 0 bytes" in again.stdout.splitlines()

    (folder / "README.md").write_text("# Edited by hand\n", "utf-8")
    (folder / "notes.txt").write_text("mine", "utf-8")
    before = _tree(folder)
    edited = run_cli(args, ENV)
    assert edited.returncode == 1 and edited.stderr.strip().splitlines() == [
        f"error: {folder / 'README.md'} differs from this build (a hand edit, or an older build's): nothing was written; "
        "move away what you want to keep (or remove it), then push again"]
    assert _listed(edited.stdout) == {**dict.fromkeys(pushed, "unchanged"), "README.md": "changed", "notes.txt": "kept"}
    assert _tree(folder) == before  # the hand edit and the file of its own kept

    # A newer build over the push of an older one: each file it changes listed, none replaced.
    (folder / "README.md").write_bytes(pushed["README.md"])
    shrink_split(build, "te", "test")
    newer = run_cli(args, ENV)
    changed = sorted(path for path, status in _listed(newer.stdout).items() if status == "changed")
    assert newer.returncode == 1 and "README.md" in changed and any(p.endswith(".parquet") for p in changed), newer.stdout
    assert newer.stderr.strip().splitlines()[-1].startswith(
        f"error: {folder / changed[0]} and {len(changed) - 1} other file(s) listed as changed differ from this build")
    assert _tree(folder) == {**pushed, "notes.txt": b"mine"}
    dry = run_cli([*args, "--dry-run"], ENV)  # the same listing, nothing written
    assert dry.returncode == 1 and _listed(dry.stdout) == _listed(newer.stdout)
    shutil.rmtree(folder)
    assert run_cli(args, ENV).returncode == 0 and _tree(folder) != pushed


def test_a_split_file_linked_out_of_the_build_is_one_line(sample_build: Path, tmp_path: Path) -> None:
    build, outside = tmp_path / "build", tmp_path / "outside"
    shutil.copytree(sample_build, build)
    outside.mkdir()
    split = next(iter(sorted((build / "te").glob("*.jsonl"))))
    shutil.move(split, outside / split.name)
    split.symlink_to(outside / split.name)
    said = f"{split}: a symbolic link to {outside.resolve() / split.name}, outside the build {build}; not read (copy the file instead)"
    checked = run_cli(["validate", str(build)], ENV)
    assert checked.returncode == 2 and checked.stderr.strip().splitlines() == [f"error: {said}"]
    pushed = run_cli(["push", "--build", str(build), "--to-dir", str(tmp_path / "pub")], ENV)
    assert pushed.returncode == 1 and pushed.stderr.strip().splitlines() == [f"error: {said}"]
    assert not (tmp_path / "pub").exists()
