"""Running independent jobs in worker processes, with the results and errors of a plain loop.

The build converts tasks independently (each writes only its own folder), so they can
run side by side; what the caller sees must not change: results come back in job
order, and the first job (in that order) that raised re-raises its exception in the
caller after the results before it, exactly where a sequential loop would have stopped.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Iterator, Sequence


def default_workers(n_jobs: int) -> int:
    """One process per job, at most one per CPU this process may use."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(n_jobs, cpus))


class _Raised:
    """An exception carried back from a worker, rebuilt even when its class does not pickle.

    Exceptions whose ``__init__`` takes other arguments than ``args`` (``SourceError``)
    cannot be unpickled; this keeps their class, ``args`` and attributes instead, and
    the worker's traceback as text.
    """

    def __init__(self, exc: BaseException) -> None:
        self.cls = type(exc)
        self.args = exc.args
        self.attrs = dict(vars(exc))
        self.trace = "".join(traceback.format_exception(exc))

    def rebuild(self) -> BaseException:
        exc = self.cls.__new__(self.cls, *self.args)
        exc.args = self.args
        vars(exc).update(self.attrs)
        if hasattr(exc, "add_note"):  # Python >= 3.11: shown under an uncaught error's traceback
            exc.add_note("raised in a worker process:\n" + self.trace)
        return exc


def _call(fn: Callable[..., Any], args: tuple) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error goes back to the caller
        return _Raised(exc)


def ordered_map(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int | None = None,
                costs: Sequence[float] | None = None) -> Iterator[Any]:
    """``fn(*job)`` for every job, yielded in job order; raises like ``for job in jobs: yield fn(*job)``.

    ``workers`` processes (default: one per job, at most one per CPU); with one worker or
    one job everything runs here, in this process. ``fn`` must be a module-level function
    and its arguments and results picklable. Workers are forked where the platform allows
    it, so they see this process's modules as they are. ``costs``: an estimate per job;
    workers take the costliest first (the longest job no longer starts last, while the
    other workers wait), the results still come in job order.
    """
    workers = default_workers(len(jobs)) if workers is None else max(1, workers)
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(*job)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        start = sorted(range(len(jobs)), key=lambda k: -costs[k]) if costs is not None else range(len(jobs))
        submitted = {k: pool.submit(_call, fn, jobs[k]) for k in start}
        futures: list[Future] = [submitted[k] for k in range(len(jobs))]
        try:
            for future in futures:
                result = future.result()
                if isinstance(result, _Raised):
                    raise result.rebuild()
                yield result
        finally:
            for future in futures:
                future.cancel()

