"""The run's identity: every input that can change a number, its short hash, and the output folder it owns; equal
identities are one run, different ones never share a folder (docs/evaluator.md#run-identity).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from evalita_data.cli.errors import one_line

from ..naming import run_folder
from ..record.build import run_id
from ..settings.thinking import DEFAULT_TRACE_BUDGET

RESULTS_FILE = "results.json"
IDENTITY_FIELD = "run_identity"  # what results.json calls the identity
# Held (filelock) by the process computing a run's folder (eval/cli/run.py): two never compute one at once.
RUN_LOCK = ".run.lock"
LOCKED = 75  # the exit code of a run whose folder another process holds (EX_TEMPFAIL)
REPLACE = "; pass --overwrite to replace it, or choose another --output-dir"  # how a results.json in the way is told


def chat_template_identity(backend: Any) -> dict:
    """Which chat template renders the prompts: the tokenizer's (with its sha256) or the server's (unknown here)."""
    template = getattr(backend.tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates (tokenizers that ship several)
        template = json.dumps(template, sort_keys=True, ensure_ascii=False)
    if not isinstance(template, str):
        return {"source": "server", "sha256": None}
    return {"source": "tokenizer", "sha256": hashlib.sha256(template.encode("utf-8")).hexdigest()}


def thinking_values(config: Any) -> dict[str, Any]:
    """Thinking's markers and trace budget (forced, or the default's value), as the identity and config hold them."""
    return {"think_markers": list(config.think_markers), "max_thinking_tokens": config.max_thinking_tokens,
            "trace_budget": config.max_thinking_tokens or DEFAULT_TRACE_BUDGET}


def run_identity(model_record: dict[str, Any], config: Any, backend: Any = None) -> dict[str, Any]:
    """Every input of a run that can change a number: the model and backend (``ModelInfo.record``, the backend's
    ``cache_identity()``), the run's options (its ``RunSpec``) and the chat template read from ``backend`` when applied
    (None without a backend: a sweep's entry, before its run starts)."""
    chat_template = chat_template_identity(backend) if config.apply_chat_template and backend is not None else None
    return {
        "model": model_record, "setting": config.setting, "apply_chat_template": config.apply_chat_template,
        "chat_template": chat_template, "system_instruction": config.system_instruction,
        "num_fewshot": config.num_fewshot, "fewshot_as_multiturn": config.fewshot_as_multiturn, "seed": config.seed,
        "split": config.split, "prompts": sorted(config.prompts) if config.prompts is not None else None,
        "limit": config.limit, "max_new_tokens": config.max_new_tokens, "constrained": config.constrained,
        # Only when on: the identities (and folders) of the runs made before --thinking existed are unchanged.
        **({"thinking": {"on": True, **thinking_values(config)}} if config.thinking else {}),
        **({"bertscore_model": config.bertscore_model} if config.bertscore_model else {}),  # adds a score
    }


def default_output_dir(identity: dict[str, Any]) -> Path:
    """``results/`` and the identity's ``run_folder``: readable, never shared by two identities (its run id)."""
    return Path("results") / run_folder(identity["model"], identity, run_id(identity))


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(folder: dict[str, Any], here: dict[str, Any], prefix: str = "") -> str | None:
    """The first input that differs, as ``name: X in the folder, Y here``; None when equal."""
    for key in sorted(set(folder) | set(here)):
        a, b = folder.get(key), here.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            return first_difference(a, b, f"{prefix}{key}.")
        return f"{prefix}{key}: {_show(a)} in the folder, {_show(b)} here"
    return None


class FolderOfAnotherRun(ValueError):
    """The output folder holds the results of another identity."""


def claim_folder(out: Path, identity: dict[str, Any], overwrite: bool) -> dict | None:
    """Make ``out`` this run's folder; returns the results.json of an earlier invocation of the same run (to resume and
    extend), else None. Another identity's results refuse, or with ``overwrite`` are removed (results.json and samples/;
    the resume cache stays: its keys name the model and request, so it can never give one run's values to another)."""
    if overwrite:
        (out / RESULTS_FILE).unlink(missing_ok=True)
        shutil.rmtree(out / "samples", ignore_errors=True)
        return None
    path = out / RESULTS_FILE
    if not path.is_file():
        return None
    try:  # an unreadable results.json is an error naming it
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FolderOfAnotherRun(f"{path} is unreadable ({one_line(err)}){REPLACE}") from None
    if not isinstance(doc, dict):
        raise FolderOfAnotherRun(f"{path} is not a results.json object{REPLACE}")
    if not isinstance(doc.get(IDENTITY_FIELD), dict):
        raise FolderOfAnotherRun(f"{path} records no run identity (an older evalita-eval){REPLACE}")
    if (difference := first_difference(doc[IDENTITY_FIELD], identity)) is not None:
        raise FolderOfAnotherRun(f"{out} holds the results of another run ({difference}); choose another --output-dir, "
                                 "or pass --overwrite to replace them")
    return doc
