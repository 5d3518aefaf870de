"""The runner's options (``RunConfig``): what `evalita-eval run` passes the runner once its options are
checked (eval/run_config.py builds it); ``running/runner.py`` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunConfig:
    num_fewshot: int = 0
    limit: int | None = None
    batch_size: int | None = 8  # None: --batch-size auto
    max_memory: int | None = None  # --max-memory in bytes (batch sizes under auto)
    apply_chat_template: bool = False
    seed: int = 1234  # lm-eval's default few-shot seed
    device: str = "cpu"
    prompts: list[str] | None = None  # None = every prompt of each task
    max_new_tokens: int | None = None  # overrides the tasks' max new tokens (as lm-eval's --gen_kwargs max_gen_toks=N)
    progress: bool = True
    # Skip (with a note) tasks whose evaluation split the data lack, instead of failing:
    # for runs over "all tasks" of a partial build.
    skip_missing: bool = False
    # Instruct settings (docs/settings.md): how MC tasks are asked and scored; constrained decoding.
    setting: str = "loglikelihood"
    constrained: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool | None = None  # None: as lm-eval, multi-turn exactly when chatting
    # Evaluate this split instead of the task's official one (--split): not comparable with the paper.
    split: str | None = None
    # Replace the results of another run in the output folder (running/identity.py) instead of refusing.
    overwrite: bool = False
    # Reasoning models (docs/settings.md): --thinking on|off, --think-markers START,END, --max-thinking-tokens.
    thinking: bool = False
    think_markers: tuple[str, str] = ("<think>", "</think>")
    max_thinking_tokens: int | None = None
    think_markers_given: bool = False  # --think-markers given: trusted on a model that shows no trace markers
    bertscore_model: str | None = None  # --bertscore-model: BERTScore F1 in OE and CE-NI (metrics.py), else absent
