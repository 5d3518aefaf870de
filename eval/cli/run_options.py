"""The options of ``evalita-eval run`` (its command is eval/cli/run.py), declared once, in --help order,
and the parsing of those whose values are checked as they are read (--batch-size, --max-memory).
The hidden ones are aliases of --backend-arg NAME=VALUE, documented in docs/evaluator.md."""

from __future__ import annotations

from typing import Callable

import click

from evalita_data.cli import RegistryChoice

from .support import backend_names


def parse_batch_size(value: str) -> int | None:
    """--batch-size: a positive count, or auto (None: sized by tokens)."""
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter(f"{value!r} is neither a positive integer nor auto", param_hint="--batch-size")
    return int(value)


def parse_max_memory(value: str | None) -> int | None:
    from ..backend_support.memory import parse_memory

    try:
        return None if value is None else parse_memory(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--max-memory") from None


def task_help() -> str:
    from evalita_data.registry import task_ids

    return ("Comma-separated task ids or entries (e.g. te,sa,ner or ner_fic), or lm-eval's evalita_llm task and group "
            f"names (evalita-mp, evalita-mp_wic_prompt-1, ...); the registered tasks: {', '.join(task_ids())}. "
            "Default: every task the data have.")


RUN_OPTIONS = [
    click.option("--config", "config", default=None, type=click.Path(dir_okay=False),
                 help="A YAML or JSON file of run options (the keys of these options, underscores for dashes; backend_args: a "
                      "mapping). Options given here override it. docs/evaluator.md."),
    click.option("--model", "model", default=None, help="Local folder or Hub id of a causal language model (required, here or in --config)."),
    click.option("--revision", default=None, help="Model revision (branch, tag or commit) on the Hub."),
    click.option("--model-name", default=None,
                 help="How results, reports, cards and exports name the model (recorded as model.name; changes no number). "
                      "Default: the Hub id, or a local folder's name and its weights hash (plain-3f2a9c1e)."),
    click.option("--data", "data_dir", default=None,
                 help="Local build folder (evalita-data build), a folder in the Hub layout, or hf:ORG for the "
                      "official Evalita-LLM splits on the Hub (hf:evalitahf, as lm-eval's evalita_llm tasks)."),
    click.option("--hub-org", default=None, help="Read the datasets <ORG>/<task> from the Hub instead of --data."),
    click.option("--tasks", default=None, help=task_help()),
    click.option("--prompts", default=None, help="Comma-separated prompt names (e.g. p1,p3). Default: every prompt."),
    click.option("--num-fewshot", default=0, show_default=True, type=click.IntRange(min=0), help="Few-shot examples per prompt."),
    click.option("--limit", default=None, type=click.IntRange(min=1), help="Evaluate only the first N documents of each task."),
    click.option("--batch-size", default="8", show_default=True, callback=lambda ctx, param, value: parse_batch_size(value),
                 help="Requests per batch (hf backend), or auto: batches sized by tokens to fit --max-memory (docs/evaluator.md)."),
    click.option("--max-memory", default=None, callback=lambda ctx, param, value: parse_max_memory(value),
                 help="Memory one forward pass may take, e.g. 4GiB (--batch-size auto). "
                      "Default: 80% of the free GPU memory on CUDA, 1GiB on CPU."),
    click.option("--backend", "backend_name", default="hf", show_default=True, type=RegistryChoice(backend_names),
                 help="The engine (the modules of evalita_eval/backends/ and the evalita_llm.backends entry points of installed "
                      "packages register them; `evalita-eval backends` lists each one's options). hf: batched plain path, "
                      "parity-tested against lm-eval; vllm: vLLM's engine, see docs/engines.md."),
    click.option("--device", default=None,
                 help="cpu, cuda, cuda:N, or auto: spread a model larger than one device over all GPUs (device_map=auto, needs accelerate). "
                      "Default: cuda when torch sees a GPU, else cpu."),
    click.option("--dtype", default="auto", show_default=True, type=click.Choice(["auto", "float32", "float16", "bfloat16"])),
    click.option("--max-length", default=None, type=click.IntRange(min=1), help="Context length in tokens; default: the model's own (lm-eval's rule)."),
    click.option("--threads", default=None, type=click.IntRange(min=1), help="torch intra-op threads (CPU); default: torch's."),
    # Engine options: aliases of --backend-arg NAME=VALUE, kept for the users who have them
    # (docs/evaluator.md); hidden from --help, listed by `evalita-eval backends`.
    click.option("--tensor-parallel-size", default=1, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg tensor_parallel_size=N (vllm)."),
    click.option("--data-parallel-size", default=1, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg data_parallel_size=N (vllm)."),
    click.option("--gpu-memory-utilization", default=None, type=click.FloatRange(0, 1, min_open=True), hidden=True,
                 help="Alias of --backend-arg gpu_memory_utilization=F (vllm)."),
    click.option("--max-model-len", default=None, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg max_model_len=N (vllm)."),
    click.option("--base-url", default=None, hidden=True, help="Alias of --backend-arg base_url=URL (openai-*)."),
    click.option("--api-key-env", default=None, hidden=True, help="Alias of --backend-arg api_key_env=NAME (openai-*)."),
    click.option("--concurrency", default=4, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg concurrency=N (openai-*)."),
    click.option("--timeout", "timeout_s", default=120.0, type=click.FloatRange(min=0, min_open=True), hidden=True,
                 help="Alias of --backend-arg timeout_s=S (openai-*)."),
    click.option("--max-retries", default=5, type=click.IntRange(min=0), hidden=True, help="Alias of --backend-arg max_retries=N (openai-*)."),
    click.option("--backend-arg", "backend_args", multiple=True, metavar="KEY=VALUE",
                 help="An option of the chosen backend (repeatable), typed and checked: `evalita-eval backends` lists each "
                      "backend's options (e.g. base_url, concurrency for openai-*; tensor_parallel_size for vllm)."),
    click.option("--apply-chat-template", is_flag=True, help="Render prompts with the tokenizer's chat template (instruction-tuned models)."),
    click.option("--trust-remote-code", is_flag=True, help="Allow model code from the Hub to run (off by default)."),
    click.option("--max-new-tokens", default=None, type=click.IntRange(min=1),
                 help="Override the generative tasks' limit (256, lm-eval's default), e.g. for a quick check."),
    click.option("--seed", default=1234, show_default=True, help="Seed of the few-shot sampler (lm-eval's default)."),
    click.option("--setting", default="loglikelihood", show_default=True, type=click.Choice(["loglikelihood", "ce", "ce-ni", "oe"]),
                 help="How MC tasks are asked: log-likelihood of each choice, or a generated answer: ce (lettered options), "
                      "ce-ni (options without letters), oe (no options). See docs/settings.md."),
    click.option("--constrained", is_flag=True, help="Constrained decoding (xgrammar): answers limited to the choices or the task's output format."),
    click.option("--system-instruction", default=None, help="System instruction (as lm-eval's --system_instruction)."),
    click.option("--fewshot-as-multiturn/--no-fewshot-as-multiturn", default=None,
                 help="Few-shot examples as user/assistant turns (default with --apply-chat-template, as lm-eval) or in one user turn."),
    click.option("--split", "eval_split", default=None,
                 help="Evaluate this split instead of the task's official one (e.g. dev for hs, train for rel); "
                      "recorded in results.json and marked 'not comparable with the paper' in reports and cards."),
    click.option("--output-dir", default=None, type=click.Path(file_okay=False),
                 help="Where results.json, samples/ and the resume cache go. Default: "
                      "results/<model>[@revision]/<setting>[-constrained][-<k>shot][-<split>][-thinking]-<run id>, the run id being a "
                      "hash of every input that can change a number; a folder holding another run's results is refused."),
    click.option("--overwrite", is_flag=True, help="Replace the results of another run in --output-dir (its resume cache is kept)."),
    click.option("--progress/--no-progress", default=None, help="A progress bar per task (default: on a terminal only)."),
]


def parse_think_markers(value: str | None) -> tuple[str, str]:
    from ..settings.thinking import DEFAULT_MARKERS, parse_markers

    try:
        return DEFAULT_MARKERS if value is None else parse_markers(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--think-markers") from None


# Reasoning models and the study's metrics (docs/settings.md, "Reasoning models").
RUN_OPTIONS += [
    click.option("--thinking", default="off", show_default=True, type=click.Choice(["on", "off"]),
                 help="Let a reasoning model think before it answers (generated settings and generative tasks): the chat "
                      "template's enable_thinking, the server's switch on openai-chat; the trace is kept apart from the answer."),
    click.option("--think-markers", default=None, metavar="START,END", callback=lambda ctx, param, value: parse_think_markers(value),
                 help="The markers around a trace (default: <think>,</think>): the answer is what follows the last END."),
    click.option("--max-thinking-tokens", default=None, type=click.IntRange(min=1),
                 help="With --thinking on: close the trace at N tokens and generate the answer after it with the task's own "
                      "budget (budget forcing; hf, vllm, openai-completions). Default: the answer budget plus 1024 trace tokens, never forced."),
    click.option("--bertscore-model", default=None, metavar="PATH_OR_ID",
                 help="Add BERTScore F1 to the OE and CE-NI settings, computed with this model (the bertscore extra); absent without it."),
]


def run_options(command: Callable) -> Callable:
    """``command`` with every option of RUN_OPTIONS, as if each were stacked above it as a decorator."""
    for option in reversed(RUN_OPTIONS):
        command = option(command)
    return command
