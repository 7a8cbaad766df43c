"""Preflight, the sampling half: ``python -m grpo_core.preflight.worker REQUEST --out ANSWER --progress FILE`` (the
child-job protocol, :mod:`grpo_core.child_jobs`).

What it does (:func:`run_preflight`): load the model and tokenizer the way the trainer does
(:mod:`grpo_core.engine.policy_model`: :func:`~grpo_core.engine.policy_model.prepare_model`, float32 on the CPU, bfloat16 on a
GPU), pick ``num_prompts`` rows (seeded by the run's ``seed``), render chat prompts with the tokenizer's chat
template (``add_generation_prompt``, as TRL does), sample ``num_generations`` completions per prompt with the run's
``temperature``, ``top_p`` and ``max_completion_length`` (``top_k`` off, as TRL's default), cut each after its first
end-of-sequence token (:meth:`~grpo_core.engine.policy_model.EndOfSequence.cut`), and score every group with
:func:`grpo_core.rewards.compose.score_group` (the trainer's own rule: weighted sum, then group advantages;
``length`` counts tokens), and run the reward-hacking probe (:func:`grpo_core.rewards.hacking_probe.probe_row`, degenerate
completions against each group's best). The report and its verdict come from :mod:`grpo_core.preflight.report`.

A run with tools or an environment samples multi-turn rollouts with TRL's own tool loop
(:mod:`grpo_core.engine.tool_rollout`: model -> tool call -> tool result -> model, at most
``max_tool_calling_iterations`` rounds, tools run as in training) and keeps each completion's turns.

What it leaves out: it samples from the model as it is before training (no LoRA update, no reference model),
one process, no vLLM; with a handful of prompts every share it reports is rough (4 prompts -> steps of 25 %).

Entry points: this module, which the dashboard runs in a subprocess (:mod:`grpo_core.preflight.job`), and
``grpo-dashboard preflight run.yaml`` (:func:`preflight_command`, in the command line's own process, its arguments
from :func:`grpo_core.preflight.job.add_preflight_arguments`). Imports torch and transformers when sampling; worker processes only.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request, error_answer, write_answer
from grpo_core.datasets.images import image_in_folder, row_image_names, rows_images_folder
from grpo_core.datasets.leaks import leak_lines
from grpo_core.datasets.rows import load_rows, prompt_text
from grpo_core.engine.policy_model import end_of_sequence_ids, load_policy, pick_device, prepare_model
from grpo_core.engine.reward_models import enable_reward_model_scoring
from grpo_core.models.prompt_lengths import require_prompts_fit
from grpo_core.preflight.report import DEFAULT_PROMPTS, PreflightReport, SampledGroup, format_report, summarize
from grpo_core.preflight.verdict import judge
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from grpo_core.rewards.compose import build_reward_funcs, score_group
from grpo_core.rewards.hacking_probe import probe_row
from grpo_core.rewards.template_tags import resolve_for_model
from grpo_core.run_config import ConfigError, RunConfig, load_run_config, parse_run_config
from grpo_core.settings import Settings, load_settings

# ------------------------------------------------------------------------------------------------- sampling


def pick_rows(num_rows: int, num_prompts: int, seed: int) -> list[int]:
    """``min(num_prompts, num_rows)`` distinct row indices, drawn with ``random.Random(seed)`` (reproducible).

    Raises:
        ValueError: the dataset is empty or ``num_prompts < 1``.
    """
    if num_rows < 1:
        raise ValueError("the dataset has no rows")
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be at least 1, got {num_prompts}")
    return random.Random(seed).sample(range(num_rows), min(num_prompts, num_rows))


def cpu_threads(default: int) -> int:
    """Torch threads for sampling on the CPU: the cores not already busy, at least 1, at most ``default``.

    OpenMP threads that share their cores with other busy processes (training workers, a second preflight) spin at
    every barrier: on a 2-core machine with a load of 8, generating with 2 threads took 9x longer than with 1
    (215 s against 24 s for 4 x 32 tokens of SmolLM2-135M). ``OMP_NUM_THREADS``, when set, wins.
    """
    if os.environ.get("OMP_NUM_THREADS"):
        return default
    try:
        busy = round(os.getloadavg()[0])
    except OSError:
        return default
    return max(1, min(default, (os.cpu_count() or 1) - busy))


def sample_groups(
    config: RunConfig,
    rows: Sequence[Mapping[str, Any]],
    model_path: str,
    *,
    num_prompts: int = DEFAULT_PROMPTS,
    progress: Callable[[str], None] = print,
    images: Path | None = None,
) -> list[SampledGroup]:
    """Sample and score ``num_prompts`` groups of ``config.num_generations`` completions (imports torch).

    Args:
        config: the run config (rules, sampling settings, ``seed``, ``device``).
        rows: dataset rows (``prompt`` plus the columns the rules read).
        model_path: folder or hub id for ``from_pretrained`` (see :func:`grpo_core.engine.policy_model.prepare_model`).
        num_prompts: groups to sample (fewer if the dataset is smaller).
        progress: receives one-line status messages.
        images: the dataset's image folder when its rows carry ``images`` (a vision-language model then gets each
            row's pictures, placed as TRL's ``prepare_multimodal_messages`` places them).

    Raises:
        ValueError: no rows, a bad rule, a row without ``prompt``.
        RuntimeError: ``device: cuda`` without a GPU.
        OSError: the model cannot be loaded.
    """
    import torch
    from transformers import GenerationConfig

    build_reward_funcs(config.rewards)  # fail on a bad rule before loading the model
    enable_reward_model_scoring()  # a reward_model rule scores here, as the trainer would
    indices = pick_rows(len(rows), num_prompts, config.seed)
    device = pick_device(config.device)
    if device == "cpu":
        torch.set_num_threads(cpu_threads(torch.get_num_threads()))
    progress(f"loading model from {model_path} on {device} ({torch.get_num_threads()} CPU threads)")
    model, tokenizer = load_policy(model_path, device)
    model.to(device).eval()
    end = end_of_sequence_ids(model, tokenizer)
    text_tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a VLM's processor holds its tokenizer
    generation_config = GenerationConfig(  # as GRPOTrainer builds it (TRL 1.16), replacing the model's defaults
        max_new_tokens=config.max_completion_length,
        do_sample=True,
        pad_token_id=text_tokenizer.pad_token_id,
        bos_token_id=text_tokenizer.bos_token_id,
        eos_token_id=list(end.ids),
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=0,
        num_return_sequences=config.num_generations,
    )
    torch.manual_seed(config.seed)
    tools = None
    if uses_tools(config):  # the run's tools, loaded as the trainer loads them (checked at launch)
        from grpo_core.engine.trainer import tool_arguments

        tools = tool_arguments(config)
    groups = []
    for number, index in enumerate(indices, start=1):
        row = dict(rows[index])
        if "prompt" not in row:
            raise ValueError(f"row {index} has no 'prompt' column")
        prompt = row["prompt"]
        chat = isinstance(prompt, list)
        if tools is not None:
            progress(f"prompt {number}/{len(indices)} (row {index}): sampling {config.num_generations} multi-turn "
                     "rollouts")
            groups.append(_tool_group(config, model, tokenizer, row, index, tools, generation_config, end, device))
            continue
        pictures = _row_pictures(row, images) if hasattr(tokenizer, "image_processor") else []
        if chat and pictures:
            from trl.data_utils import prepare_multimodal_messages

            messages = prepare_multimodal_messages(prompt, images=pictures)
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            encoded = tokenizer(text=[text], images=[pictures], return_tensors="pt", add_special_tokens=False)
        elif chat:
            text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            encoded = tokenizer(text=text, return_tensors="pt", add_special_tokens=False)
        else:
            encoded = tokenizer(str(prompt), return_tensors="pt")
        encoded = {k: v.to(device) for k, v in encoded.items()}
        progress(f"prompt {number}/{len(indices)} (row {index}): sampling {config.num_generations} completions")
        with torch.no_grad():
            output = model.generate(**encoded, generation_config=generation_config)
        generated = output[:, encoded["input_ids"].shape[1] :].tolist()
        cut = [end.cut(ids) for ids in generated]
        ids = [c[0] for c in cut]
        texts = text_tokenizer.batch_decode(ids, skip_special_tokens=True)
        completions: list[Any] = [[{"role": "assistant", "content": t}] for t in texts] if chat else texts
        score = score_group(config.rewards, completions, row, completion_ids=ids, scale_rewards=config.scale_rewards)
        probes = probe_row(
            config.rewards, row, texts, row_index=index, prompt=prompt_text(prompt),
            tokenize=lambda t: [*text_tokenizer(t, add_special_tokens=False)["input_ids"], end.ids[0]],
        )
        groups.append(
            SampledGroup(
                row_index=index,
                prompt=prompt_text(prompt),
                texts=texts,
                num_tokens=[len(i) for i in ids],
                truncated=[c[1] for c in cut],
                score=score,
                probes=probes,
            )
        )
    return groups


def uses_tools(config: RunConfig) -> bool:
    """Whether ``config`` gives the policy tools or an environment (its rollouts are multi-turn)."""
    return bool(config.tools or config.tool_plugins or config.environment)


def _tool_group(config: RunConfig, model, tokenizer, row: dict[str, Any], index: int, tools: dict[str, Any],
                generation_config, end, device: str) -> SampledGroup:
    """One group of multi-turn rollouts of ``row`` (TRL's tool loop, :mod:`grpo_core.engine.tool_rollout`), scored
    as the trainer scores them (the rules read each final assistant turn; an environment's reward added).

    Raises:
        ValueError: the prompt is not a chat (TRL renders tools only into chat prompts), or the template cannot
            carry tools.
    """
    import copy

    import torch

    from grpo_core.engine.tool_rollout import sample_tool_rollouts, with_environment_rewards
    from grpo_core.rewards.registry import completion_text
    from grpo_core.rewards.trajectory_probe import probe_trajectories, recipe_tools
    from grpo_core.tools.turns import turns_of_completion

    prompt = row["prompt"]
    if not isinstance(prompt, list):
        raise ValueError(f"row {index}: a run with tools needs chat prompts (a list of messages); this one is text")

    def generate(prompt_ids: list[int], count: int) -> list[tuple[list[int], bool]]:
        options = copy.deepcopy(generation_config)
        options.num_return_sequences = count
        inputs = torch.tensor([prompt_ids], device=device)
        with torch.no_grad():
            output = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                    generation_config=options)
        return [end.cut(ids) for ids in output[:, len(prompt_ids):].tolist()]

    rollouts = sample_tool_rollouts(
        model, tokenizer, prompt, row, num_rollouts=config.num_generations, tools=tools.get("tools", []),
        environment_factory=tools.get("environment_factory"), generate=generate,
        max_completion_length=config.max_completion_length, max_iterations=config.max_tool_calling_iterations)
    completions = [rollout.messages for rollout in rollouts]
    ids = [rollout.completion_ids for rollout in rollouts]
    score = score_group(config.rewards, completions, row, completion_ids=ids, scale_rewards=config.scale_rewards)
    score = with_environment_rewards(score, rollouts, config.scale_rewards)
    texts = [completion_text(messages) for messages in completions]
    return SampledGroup(
        row_index=index, prompt=prompt_text(prompt), texts=texts,
        num_tokens=[sum(rollout.tool_mask) for rollout in rollouts],  # the model's tokens, as TRL counts them
        truncated=[rollout.truncated for rollout in rollouts], score=score,
        turns=[turns_of_completion(rollout.messages, rollout.environment_reward) for rollout in rollouts],
        probes=probe_trajectories(config.rewards, row, completions, row_index=index,
                                  tools=recipe_tools(config.model_dump(mode="json"))))


def _row_pictures(row: Mapping[str, Any], images: Path | None) -> list:
    """The row's stored images as RGB PIL images (``[]`` without an image folder or images)."""
    if images is None:
        return []
    from PIL import Image

    pictures = []
    for name in row_image_names(dict(row)):
        with Image.open(image_in_folder(images, name), formats=["PNG"]) as picture:
            pictures.append(picture.convert("RGB"))
    return pictures


def run_preflight(
    config: RunConfig,
    rows: Sequence[Mapping[str, Any]],
    *,
    model_cache_dir: Path,
    num_prompts: int = DEFAULT_PROMPTS,
    progress: Callable[[str], None] = print,
    images: Path | None = None,
) -> PreflightReport:
    """Prepare the model, sample and score ``num_prompts`` groups, summarise and judge them (imports torch);
    ``images``: the dataset's image folder (see :func:`sample_groups`).

    Raises:
        grpo_core.models.source.ModelSourceError: the model cannot be found or converted.
        as :func:`sample_groups`.
    """
    started = time.monotonic()
    model_path = prepare_model(config.model, model_cache_dir, progress)
    if (Path(model_path) / "tokenizer.json").is_file():  # the run would refuse these prompts: so does the preflight
        from grpo_core.engine.tool_plugin_check import run_tool_schemas_of

        require_prompts_fit(rows, model_path, config.max_completion_length, tools=run_tool_schemas_of(config))
    if uses_tools(config):  # TRL would refuse the run at its start: say so now
        from transformers import AutoTokenizer

        from grpo_core.engine.tool_template import tool_calling_problem, use_tool_chat_template

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        template = use_tool_chat_template(tokenizer)  # as the run will: a ChatML model gets a template with tools
        if template:
            progress(f"the model's chat template cannot render tools: the run uses {template}")
        problem = tool_calling_problem(tokenizer)
        if problem:
            raise ConfigError(f"tools: {problem}")
    rewards, opens_think = resolve_for_model(config.rewards, str(model_path), rows)
    config = config.model_copy(update={"rewards": rewards})  # as the run will resolve template_opened_think: auto
    groups = sample_groups(config, rows, model_path, num_prompts=num_prompts, progress=progress, images=images)
    report = summarize(groups, config=config, seconds=time.monotonic() - started)
    report.template_opened_think = opens_think
    # the web-side check (missing, prose, not one number) over every row; math-verify's parse costs ~10 ms a row, and
    # what it cannot parse shows as the rule's None share in the sampled groups
    coverage = dataset_answer_coverage(rows, [spec.rule for spec in config.rewards])
    report.answers_not_judged = {c.rule: c.not_judged for c in coverage if c.not_judged}
    report.answer_coverage_notes = coverage_lines(coverage)
    report.prompt_leak_notes = leak_lines(rows)
    report.verdict = judge(report)
    return report


# ------------------------------------------------------------------------------------------------- entry point


def load_inputs(config: RunConfig, *, dataset_id: int | None = None, data_dir: str | None = None,
                db_url: str | None = None, base_dir: Path | None = None,
                ) -> tuple[RunConfig, list[dict[str, Any]], Settings, Path | None]:
    """The config (``dataset_id`` put in when given), its dataset rows, the settings (``data_dir``, ``db_url``,
    else the environment's) and the dataset's image folder (``None``: its rows carry no images) of a preflight.

    Raises:
        ConfigError, ValueError, OSError: the dataset cannot be read (the message says which and why).
    """
    if dataset_id is not None:
        config = config.model_copy(update={"dataset_id": dataset_id})
    settings = load_settings(data_dir=data_dir, db_url=db_url)
    store = None
    try:
        if config.dataset_id is not None:
            from storage import Store

            store = Store(settings.db_url)
        rows = load_rows(store, config, base_dir=base_dir)
        images = rows_images_folder(store, config, rows)
    finally:
        if store is not None:
            store.close()
    return config, rows, settings, images


def _report(config: RunConfig, rows: list[dict[str, Any]], settings: Settings, prompts: int,
            progress: Callable[[str], None], images: Path | None = None) -> PreflightReport:
    progress(f"sampling {min(prompts, len(rows))} prompts x {config.num_generations} completions from {config.model}")
    settings.model_cache_dir.mkdir(parents=True, exist_ok=True)
    return run_preflight(config, rows, model_cache_dir=settings.model_cache_dir, num_prompts=prompts,
                         progress=progress, images=images)


def preflight_command(
    config_path: str,
    *,
    prompts: int = DEFAULT_PROMPTS,
    dataset_id: int | None = None,
    data_dir: str | None = None,
    db_url: str | None = None,
    json_out: str | None = None,
    prog: str = "preflight",
) -> int:
    """``grpo-dashboard preflight``: run a preflight from a config file, print the report; exit status 0, 2 for a
    bad config, 1 on failure.

    With ``json_out`` the report (or the error shape ``{"error": message}``) is written there as JSON, atomically.
    """

    def write_json(data: dict[str, Any]) -> None:
        if json_out:
            write_answer(Path(json_out), data)

    def progress(message: str) -> None:
        print(f"[preflight] {message}", flush=True)

    try:
        config, rows, settings, images = load_inputs(load_run_config(config_path), dataset_id=dataset_id,
                                                     data_dir=data_dir, db_url=db_url,
                                                     base_dir=Path(config_path).resolve().parent)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        write_json({"error": str(exc)})
        return 2
    try:
        report = _report(config, rows, settings, prompts, progress, images)
    except Exception as exc:  # noqa: BLE001 - any failure is reported, to the terminal and to the JSON file
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
        write_json(error_answer(exc))
        return 1
    print(format_report(report), flush=True)
    write_json(report.to_dict())
    return 0


def preflight_from_args(args: argparse.Namespace, prog: str) -> int:
    """:func:`preflight_command` on arguments parsed by :func:`grpo_core.preflight.job.add_preflight_arguments`
    (``grpo-dashboard preflight``); returns the exit status."""
    return preflight_command(
        args.config,
        prompts=args.prompts,
        dataset_id=args.dataset_id,
        data_dir=args.data_dir,
        db_url=args.db,
        json_out=args.json_out,
        prog=prog,
    )


def answer(request: Mapping[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The child-job answer (:mod:`grpo_core.preflight.job`'s request ``{"config", "num_prompts", "data_dir"}``; the
    store URL in the environment): the report as JSON (:meth:`PreflightReport.to_dict`), also printed to the log.

    Raises:
        ConfigError, ValueError, OSError: the config or its dataset cannot be used; as :func:`run_preflight`.
    """
    config = parse_run_config(request["config"], source="the preflight's config")
    config, rows, settings, images = load_inputs(config, data_dir=str(request["data_dir"]))
    report = _report(config, rows, settings, max(1, int(request["num_prompts"])), progress, images)
    print(format_report(report), flush=True)
    return report.to_dict()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.preflight.worker REQUEST --out ANSWER --progress FILE`` (the child-job
    protocol, :func:`grpo_core.child_jobs.answer_file.answer_request`); exit status 0."""
    return answer_request("python -m grpo_core.preflight.worker", answer, argv, echo="[preflight] ")


if __name__ == "__main__":
    sys.exit(main())
