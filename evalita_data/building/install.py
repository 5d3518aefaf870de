"""Atomic installation of a build: readers of ``--out`` see the old build or the new one, never a mix.

Layout, for ``--out evalita-build`` (the default)::

    .evalita-build.versions/<id>/                 complete builds (manifest.json and every task folder)
    evalita-build -> .evalita-build.versions/<id>   the one switch: a symlink replaced by rename(2)

Users and tools keep reading ``build/<task>/<split>.jsonl`` and ``build/manifest.json``;
they go through the one symlink, so replacing it (an atomic rename) switches the manifest
and every file together. A new build is written into a fresh version folder; the other
entries of the previous build (tasks not rebuilt, files a user put there) are hard-linked
into it, so it is complete before the switch. Until the switch nothing a reader sees has
changed: a kill -9 or a full disk at any instruction leaves the previous build. What a
killed run left (a version that is not current, a temporary link) is removed by the next
run, under a lock so that two builds never remove each other's work.

A real folder written by an older evalita-data is replaced the same way, by exchanging
it with the link in one ``renameat2(RENAME_EXCHANGE)`` call (Linux).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import time
from pathlib import Path
from typing import IO

from ..errors import EvalitaDataError
from ..manifest import MANIFEST_FILE, BuildManifest

LOCK = ".lock"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def versions_dir(out: Path) -> Path:
    """The folder beside ``out`` holding its versions (hidden, named after it)."""
    return out.parent / f".{out.name}.versions"


def _temp_prefix(out: Path) -> str:
    # Also the prefix of the temporary folders of older evalita-data versions: cleaned alike.
    return f".{out.name}.tmp-"


def current_version(out: Path) -> Path | None:
    """The version folder ``out`` links to, if ``out`` is such a link."""
    if not out.is_symlink():
        return None
    target = out.parent / os.readlink(out)
    return target if target.is_dir() and target.parent == versions_dir(out) else None


class Staging:
    """One build's exclusive hold on ``out``: a lock, cleanup of old leftovers, a fresh version folder."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.versions = versions_dir(self.out)
        self._lock: IO[str] | None = None
        self.dir: Path | None = None

    def __enter__(self) -> "Staging":
        self.versions.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.versions / LOCK, "a")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise EvalitaDataError(f"{self.out}: another build is writing this folder; wait for it to finish") from None
        remove_leftovers(self.out)
        stamp = time.strftime('%Y%m%dT%H%M%S', time.gmtime())
        self.dir = self.versions / f"{stamp}-{os.getpid()}-{os.urandom(3).hex()}"
        self.dir.mkdir()
        return self

    def __exit__(self, *exc: object) -> None:
        # The staged version is kept only if it became current.
        if self.dir is not None and self.dir != current_version(self.out):
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()  # releases the lock

    def previous_root(self) -> Path | None:
        """The folder readers see now (a version, or a real folder of an older layout), if any."""
        return self.out if self.out.is_dir() else None

    def commit(self, manifest: BuildManifest, replaced: set[str]) -> None:
        """Complete the staged version and switch ``out`` to it.

        Every entry of the previous build except ``replaced`` (the tasks just built) and its
        manifest is carried over by hard links; then the manifest is written and ``out`` switched.
        """
        assert self.dir is not None
        prev = self.previous_root()
        if prev is not None:
            for entry in sorted(os.listdir(prev)):
                if entry not in replaced and entry != MANIFEST_FILE and not (self.dir / entry).exists():
                    _link_entry(prev / entry, self.dir / entry)
        _write_durably(self.dir / MANIFEST_FILE, manifest.dumps())
        _fsync_dir(self.versions)
        tmp_link = self.out.parent / f"{_temp_prefix(self.out)}link-{self.dir.name}"
        os.symlink(f"{self.versions.name}/{self.dir.name}", tmp_link)
        if self.out.exists() and not self.out.is_symlink():
            _exchange(tmp_link, self.out)  # an older layout's real folder: now at tmp_link, removed below
        else:
            os.replace(tmp_link, self.out)  # the switch
        _fsync_dir(self.out.parent)
        remove_leftovers(self.out)


def remove_leftovers(out: Path) -> None:
    """Remove what killed runs left: versions that are not current, temporary links and folders."""
    keep = current_version(out)
    versions = versions_dir(out)
    if versions.is_dir():
        for child in versions.iterdir():
            if child.name != LOCK and (keep is None or child.name != keep.name):
                _remove(child)
    for child in out.parent.glob(f"{_temp_prefix(out)}*"):
        _remove(child)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), str(b))
    # No atomic exchange here (another OS or file system): a short window without ``b``.
    aside = b.parent / f"{_temp_prefix(b)}old-{os.getpid()}"
    os.replace(b, aside)
    os.replace(a, b)
    os.replace(aside, a)


def _link_entry(src: Path, dest: Path) -> None:
    """Copy a file or folder by hard links (no data copied); a real copy across devices."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError as err:
            if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
            shutil.copy2(s, d)

    if src.is_symlink():
        os.symlink(os.readlink(src), dest)
    elif src.is_dir():
        shutil.copytree(src, dest, symlinks=True, copy_function=link)
    else:
        link(str(src), str(dest))


def _write_durably(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
