"""``BackendOptions`` built the one way ``evalita-eval run`` builds them: a ``RunSpec`` of the given keys
(eval/run_config.py; a key that is no field of it, such as ``concurrency``, is a backend_arg, typed by the
backend's options), then ``backend_options``. Tests build a backend "as run builds it" through this, not
through a second path."""

from __future__ import annotations

from typing import Any

from evalita_eval.api import BackendOptions
from evalita_eval.run_config import RunSpec, backend_options, build_spec


def options_as_run_builds(backend: str, **values: Any) -> BackendOptions:
    args = {**values.pop("backend_args", {}), **{k: values.pop(k) for k in list(values) if k not in RunSpec.model_fields}}
    spec = build_spec({"backend": backend, "data": "data", **values, "backend_args": args}, None)[0]
    return backend_options(spec, spec.device or "cpu")
