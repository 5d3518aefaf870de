"""``BackendOptions`` built the one way ``evalita-eval run`` builds them: a ``RunSpec`` of the given keys
(eval/run_config.py; an alias flag's key such as ``concurrency`` folded into ``backend_args``), then
``backend_options``. Tests build a backend "as run builds it" through this, not through a second path."""

from __future__ import annotations

from typing import Any

from evalita_eval.api import BackendOptions
from evalita_eval.run_config import backend_options, build_spec


def options_as_run_builds(backend: str, **values: Any) -> BackendOptions:
    spec, _notes = build_spec({"backend": backend, **values}, None)
    return backend_options(spec, spec.device or "cpu")
