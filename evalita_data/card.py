"""Dataset cards (README.md with Hub YAML front matter) from the registry and the manifest.

A card is a pure function of the task declaration, the task's manifest entry and
the file layout it describes: no timestamps, so the same build gives the same card.
Two layouts exist: the build folder (``<split>.jsonl`` beside the card, so that
``datasets.load_dataset("build/<task>")`` works) and the published repository
(``data/<split>.parquet``, see :mod:`evalita_data.hub.layout`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from .manifest import MANIFEST_FILE, BuildReport, BuiltTask
from .registry import get_task
from .schema_check import load_schema
from .taskspec import MCPrompt, TaskSpec

DEFAULT_ORG = "evalita-llm"
CARD = "README.md"
# Above this many raw files the card gives a summary; manifest.json lists them all.
MAX_LISTED_INPUTS = 20

# Creative Commons licenses that the Hub knows by id (its license list); others are "other".
_HUB_CC_IDS = {
    "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0",
    "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0",
    "cc-by-nd-4.0", "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0",
    "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
}
_CC = re.compile(r"\bCC[ -]BY((?:-(?:NC|SA|ND))*) (\d\.\d)( IT)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class HubLicense:
    """What the card's YAML says about the license: Hub ids, and a name/link for "other"."""

    ids: tuple[str, ...]
    name: str | None = None
    link: str | None = None

    def yaml_fields(self) -> dict:
        out: dict = {"license": self.ids[0] if len(self.ids) == 1 else list(self.ids)}
        if self.name:
            out["license_name"] = self.name
        if self.link:
            out["license_link"] = self.link
        return out


def hub_license(text: str) -> HubLicense:
    """Map a registry license string to Hub license ids.

    "CC BY-NC-SA 4.0" -> cc-by-nc-sa-4.0; several CC licenses -> a list; a national
    port ("CC BY-NC-SA 3.0 IT") -> other + license_name/link; "unknown ..." -> unknown;
    anything else -> other with the text as license_name.
    """
    found = _CC.findall(text)
    if not found:
        if text.strip().lower().startswith("unknown"):
            return HubLicense(("unknown",))
        return HubLicense(("other",), name=_slug(text))
    ids, ported = [], []
    for parts, version, port in found:
        base = "cc-by" + parts.lower() + "-" + version
        if port or base not in _HUB_CC_IDS:
            ported.append((base + ("-it" if port else ""), parts.lower().lstrip("-"), version, port.strip().lower()))
        elif base not in ids:
            ids.append(base)
    if ported:
        if ids or len(ported) > 1:
            # The Hub cannot say "one of these plus a port": name them all under "other".
            return HubLicense(("other",), name=_slug(text))
        name, parts, version, port = ported[0]
        link = f"https://creativecommons.org/licenses/by-{parts}/{version}/" + (f"{port}/" if port else "")
        return HubLicense(("other",), name=name, link=link.replace("by-/", "by/"))
    return HubLicense(tuple(ids))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64] or "other"


def size_category(rows: int) -> str:
    """The Hub's size bucket of a dataset with ``rows`` records in all."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if rows < limit:
            return label
    return "100M<n<1B"


def config_split(spec: TaskSpec, split_key: str) -> tuple[str, str]:
    """("default", split) for plain tasks; ("adg", "train") for NER's "adg/train"."""
    if spec.configs:
        config, _, split = split_key.partition("/")
        if not split or config not in spec.configs:
            raise ValueError(f"{spec.id}: split {split_key!r} is not <config>/<split> with config in {spec.configs}")
        return config, split
    return "default", split_key


def ordered_splits(spec: TaskSpec, keys) -> list[str]:
    """Split keys in the registry's order (train, dev, ... as in the paper), others after, sorted."""
    known = list(spec.paper_splits)
    return sorted(keys, key=lambda k: (known.index(k), "") if k in known else (len(known), k))


def configs_yaml(spec: TaskSpec, split_paths: dict[str, str]) -> list[dict]:
    """The ``configs`` entry: one config per NER domain, else "default"; splits in registry order."""
    configs: dict[str, list[dict]] = {}
    for key in ordered_splits(spec, split_paths):
        path = split_paths[key]
        config, split = config_split(spec, key)
        configs.setdefault(config, []).append({"split": split, "path": path})
    order = spec.configs or ["default"]
    return [{"config_name": c, "data_files": configs[c]} for c in order if c in configs]


def front_matter(spec: TaskSpec, entry: BuiltTask, split_paths: dict[str, str]) -> dict:
    total = sum(s.rows for s in entry.splits.values())
    meta: dict = {
        "pretty_name": f"Evalita-LLM {spec.id.upper()}: {spec.title}",
        "language": ["it"],
        **hub_license(spec.license).yaml_fields(),
        "task_categories": list(spec.task_categories),
        "size_categories": [size_category(total)],
        "source_datasets": ["extended"],
        "tags": ["evalita", "evalita-llm", "italian"],
        "configs": configs_yaml(spec, split_paths),
    }
    return meta


def _schema_rows(spec: TaskSpec) -> list[str]:
    def describe(node: dict) -> str:
        kind = node.get("type")
        if kind == "array":
            items = node.get("prefixItems")
            if items:
                return "[" + ", ".join(describe(i) for i in items) + "]"
            return f"list of {describe(node['items'])}"
        if kind == "object":
            return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in node["properties"].items()) + "}"
        if "enum" in node:
            return f"{kind}, one of {', '.join(json.dumps(v, ensure_ascii=False) for v in node['enum'])}"
        return str(kind)

    schema = load_schema(spec.schema)
    lines = ["| field | type |", "|---|---|"]
    for name, node in schema["properties"].items():
        lines.append(f"| `{name}` | {describe(node).replace('|', '/')} |")
    return lines


def _conversion_doc(spec: TaskSpec) -> str:
    converter = spec.load_converter()
    if converter is None:
        return ""
    return (sys.modules[converter.__module__].__doc__ or "").strip()


def _inputs_lines(inputs: dict) -> list[str]:
    """The raw files read with their sha256; a long list (REL: one file per document) is summarised."""
    if not inputs:
        return []
    if len(inputs) > MAX_LISTED_INPUTS:
        total = sum(v["bytes"] for v in inputs.values())
        return ["", f"Raw files read: {len(inputs)} files, {total} bytes in all; the sha256 of each is in "
                    f"`{MANIFEST_FILE}`."]
    lines = ["", "Raw files read:", "", "| file | bytes | sha256 |", "|---|---|---|"]
    return lines + [f"| `{name}` | {v['bytes']} | `{v['sha256']}` |" for name, v in inputs.items()]


def _fence(text: str) -> list[str]:
    ticks = "````" if "```" in text else "```"
    return [ticks + "text", text, ticks]


def _prompt_lines(spec: TaskSpec) -> list[str]:
    lines = []
    for p in spec.prompts:
        lines += ["", f"**{p.name}**", ""] + _fence(p.template)
        if isinstance(p, MCPrompt):
            choices = p.choices if isinstance(p.choices, str) else json.dumps(p.choices, ensure_ascii=False)
            lines.append(f"Choices: `{choices}`")
    return lines


def _counts_table(title: str, counts: dict) -> list[str]:
    if not counts:
        return [f"{title}: none."]
    lines = [f"{title}:", "", "| reason | records |", "|---|---|"]
    lines += [f"| {reason.replace('|', '/')} | {n} |" for reason, n in counts.items()]
    return lines


def render_card(task_id: str, entry: BuiltTask, split_paths: dict[str, str], org: str = DEFAULT_ORG,
                data_format: str = "Parquet") -> str:
    """The README.md of a task, for the given manifest entry and split file paths."""
    spec = get_task(task_id)
    meta = front_matter(spec, entry, split_paths)
    repo = f"{org}/{task_id}"
    report = entry.report or BuildReport()
    tool_version = "?" if entry.tool_version is None else entry.tool_version
    lic = hub_license(spec.license)
    out = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000).rstrip(), "---", ""]
    out += [f"# Evalita-LLM {spec.id.upper()}: {spec.title}", ""]
    out += [
        f"The **{spec.id}** task of the Evalita-LLM benchmark for Italian language models (Magnini et al., 2025), "
        f"converted from the original Evalita distribution by `evalita-data` {tool_version}. Evaluation split: "
        f"`{spec.eval_split}`; few-shot examples from `{spec.fewshot_split}`; "
        f"{'multiple-choice scoring' if spec.output_type == 'multiple_choice' else 'greedy generation'}.",
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("{repo}"' + (f', "{spec.configs[0]}")' if spec.configs else ")"),
        "```",
    ]
    if spec.configs:
        out += ["", f"Configurations (one per domain): {', '.join(f'`{c}`' for c in spec.configs)}."]
    out += ["", "## Source", "", f"- Original data: {spec.source}", f"- Homepage: {spec.homepage}",
            f"- License: {spec.license} (Hub: {', '.join(lic.ids)}{', ' + lic.name if lic.name else ''})",
            "", "Please cite the original work:", ""] + _fence(spec.citation)
    out += ["", "## Conversion", "",
            f"Built by `evalita-data build` (tool {'evalita-data' if entry.tool is None else entry.tool} "
            f"{tool_version}, converter `{spec.converter_name}`, seed {entry.seed}). Every random choice uses this "
            "seed; the same raw files give byte-identical splits."]
    doc = _conversion_doc(spec)
    if doc:
        out += ["", doc]
    out += _inputs_lines(entry.inputs or {})
    out += ["", "## Record schema", "", f"Every record has exactly these fields (`{spec.schema_label}`):", ""]
    out += _schema_rows(spec)
    out += ["", "## Splits", "", f"Files are {data_format}.", "", "| split | rows | rows in the paper | file |",
            "|---|---|---|---|"]
    for key in ordered_splits(spec, entry.splits):
        split, paper = entry.splits[key], spec.paper_splits.get(key, "")
        out.append(f"| {key} | {split.rows} | {paper} | `{split_paths[key]}` |")
    for m in entry.missing_parts():
        out += ["", f"Not included: splits {', '.join(m.splits or [])} (missing originals {', '.join(m.files or [])}). "
                    f"{m.hint}"]
    out += ["", "## Dropped and repaired records", "",
            "Nothing is dropped or changed silently; the counts below come from the build manifest.", ""]
    out += _counts_table("Dropped", report.dropped or {}) + [""] + _counts_table("Repaired", report.repaired or {})
    out += ["", "## Prompts used by Evalita-LLM", "",
            f"Output type `{spec.output_type}`; metrics: {', '.join(spec.metric_names())}. "
            "Templates are Jinja over the record fields" + (
                " and " + ", ".join(f"`{k}` = `{v}`" for k, v in spec.derived.items()) if spec.derived else "") + "."]
    out += _prompt_lines(spec)
    return "\n".join(out) + "\n"


def build_card(task_id: str, entry: BuiltTask, org: str = DEFAULT_ORG) -> str:
    """The card of the build folder: it points at the JSONL files beside it."""
    paths = {key: split.file for key, split in entry.splits.items()}
    return render_card(task_id, entry, paths, org, data_format="JSON Lines (UTF-8, one record per line)")


def write_build_card(task_id: str, task_dir: Path, entry: BuiltTask) -> None:
    """Post-task hook of the build: README.md next to the splits."""
    (task_dir / CARD).write_text(build_card(task_id, entry), encoding="utf-8", newline="\n")


def parse_front_matter(card: str) -> dict:
    """The YAML front matter of a card (raises ValueError if there is none)."""
    if not card.startswith("---\n"):
        raise ValueError("card does not start with YAML front matter")
    end = card.index("\n---\n", 4)
    return yaml.safe_load(card[4:end])
