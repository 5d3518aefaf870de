"""The backend registry and contract: construction from options, --device auto, --threads,
capabilities checked before any work, CLI choices from the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest
from click.testing import CliRunner

from evalita_eval.api import Backend, BackendOptions, BackendUnsupported, Capabilities, GenRequest, LLRequest, LLResult, prompt_room, scoring_input
from evalita_eval.backends import backend_names, create_backend

from paths import TEST_DATA

DATA = TEST_DATA / "build"
REQUESTS = [LLRequest("La frase: 'Roma è in Italia.' implica che", " Sì"), LLRequest("Risposta:", " No")]


def test_the_cli_lists_the_registry() -> None:
    from evalita_eval.cli import main

    assert {"hf", "vllm"} <= set(backend_names()) and "fast" not in backend_names()  # fast: removed (issue 38)
    result = CliRunner().invoke(main, ["run", "--model", "x", "--data", str(DATA), "--backend", "nope"])
    assert result.exit_code == 2
    assert all(name in result.output for name in backend_names())


def test_scoring_input_is_lm_evals_left_truncation() -> None:
    assert scoring_input([1, 2, 3], [4, 5], 10) == [1, 2, 3, 4]
    assert scoring_input([1, 2, 3], [4, 5], 3) == [2, 3, 4]  # the last max_length + 1 tokens, minus the last one
    with pytest.raises(ValueError, match="has 2 tokens, more than the model's maximum length 1"):
        scoring_input([1], [4, 5], 1, "xy")
    with pytest.raises(ValueError, match="encodes to no tokens"):
        scoring_input([1], [], 4, "")


def test_prompt_room_is_one_rule_for_every_generating_backend(tiny_model: Path) -> None:
    assert prompt_room(10, 4) == 6 and prompt_room(10, 9) == 1
    with pytest.raises(ValueError, match="max_new_tokens 10 leaves no room for the prompt in max length 10"):
        prompt_room(10, 10)
    # The backend left-truncates by it and refuses, with these words, a request that leaves no room.
    for name in ("hf",):
        backend = create_backend(name, BackendOptions(str(tiny_model), dtype="float32", max_length=8))
        assert backend.max_length == 8
        with pytest.raises(ValueError, match="max_new_tokens 8 leaves no room for the prompt in max length 8"):
            backend.generate_until([GenRequest("Risposta:", ("\n",), 8)])
        assert len(backend.generate_until([GenRequest("una frase lunga " * 10, ("\n",), 3)])) == 1


def test_device_auto_and_threads(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    seen: list[dict] = []
    real = AutoModelForCausalLM.from_pretrained.__func__

    def recording(cls, *args, **kwargs):  # the real loader, its arguments noted
        seen.append(kwargs)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(recording))

    before = torch.get_num_threads()
    try:
        cpu = create_backend("hf", BackendOptions(str(tiny_model), dtype="float32", threads=1))
        assert torch.get_num_threads() == 1
        auto = create_backend("hf", BackendOptions(str(tiny_model), dtype="float32", device="auto"))
    finally:
        torch.set_num_threads(before)
    assert [kw.get("device_map") for kw in seen] == [None, "auto"]  # accelerate places the second one
    assert auto.loglikelihood(REQUESTS) == cpu.loglikelihood(REQUESTS)
    assert cpu.requests_per_call is None


class _GenerateOnly(Backend):
    name = "generate-only"
    capabilities = Capabilities(loglikelihood=False, chat_template=False)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "_GenerateOnly":
        return cls()

    def generate_until(self, requests: Sequence) -> list[str]:
        return ["" for _ in requests]

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise AssertionError("the runner must refuse before sending any request")


def test_capabilities_are_checked_before_any_work(tmp_path: Path) -> None:
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    out = tmp_path / "res"
    runner = Runner(_GenerateOnly(), ModelInfo("m", None, "none", "generate-only"), FolderSource(DATA), RunSpec(model="m", data="data", progress=False), out)
    with pytest.raises(BackendUnsupported, match="backend 'generate-only' cannot score log-likelihoods, which te, sa need"):
        runner.run(select_entries(["te", "sum", "sa"]))
    assert not (out / "results.json").exists()
    with pytest.raises(BackendUnsupported, match="cannot apply a chat template"):
        Runner(_GenerateOnly(), ModelInfo("m", None, "none"), FolderSource(DATA), RunSpec(model="m", data="data", apply_chat_template=True), tmp_path / "c")
