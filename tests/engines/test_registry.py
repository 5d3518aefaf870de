"""The engine backends are registered without importing vLLM; without vLLM, --backend vllm says how to install it."""

from __future__ import annotations

import sys

import pytest

from .engine_helpers import HAVE_VLLM
from evalita_eval.api import BackendOptions
from evalita_eval.backends import backend_names, create_backend, get_backend_class


def test_engines_are_registered_without_importing_vllm() -> None:
    assert {"vllm", "openai-completions", "openai-chat"} <= set(backend_names())
    assert get_backend_class("openai-chat").capabilities.loglikelihood is False
    assert get_backend_class("openai-chat").capabilities.chat_messages is True
    assert get_backend_class("vllm").capabilities.loglikelihood is True
    if not HAVE_VLLM:
        assert "vllm" not in sys.modules


@pytest.mark.skipif(HAVE_VLLM, reason="vLLM is installed: the missing-vLLM message cannot show")
def test_vllm_missing_is_an_install_hint(tiny_model) -> None:
    with pytest.raises(RuntimeError, match=r"--backend vllm needs vLLM: pip install -e '\.\[vllm\]'"):
        create_backend("vllm", BackendOptions(model=str(tiny_model)))
