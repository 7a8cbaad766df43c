"""Tests of datasets as people have them: a column mapping (prompt column, system prompt, renames) at upload and in
the run config, ``save_to_disk`` folders (zipped for upload), JSON arrays, hub ids offline, the prompt as the model
gets it (the chat template rendered without transformers, compared with transformers' own rendering) and prompts
too long for the model's context refused before launch, naming the rows."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from grpo_core.datasets.formats import load_prompt_dataset, read_normalized
from grpo_core.datasets.library import import_dataset, import_hub_dataset, load_upload, parse_renames
from grpo_core.datasets.prompt_dataset import ColumnMapping, DatasetError
from grpo_core.datasets.rows import load_rows
from grpo_core.models.prompt_lengths import (
    PromptTooLongError,
    check_prompt_lengths,
    model_prompt_text,
    preview_model_prompts,
    read_model_text,
    require_prompts_fit,
)
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.submit.validate import validate_run_config

GSM8K_ROWS = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
                 "How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nShe earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"},
]
SYSTEM = "Solve the problem. End with '#### <number>'."
NUMERIC_ONLY = [{"rule": "numeric_answer", "weight": 1.0}]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def gsm8k_file(tmp_path) -> Path:
    return _write_jsonl(tmp_path / "gsm8k-train.jsonl", GSM8K_ROWS)


# ------------------------------------------------------------------------------------------------- the mapping
def test_gsm8k_layout_is_refused_without_a_mapping_with_a_hint(gsm8k_file):
    with pytest.raises(DatasetError) as caught:
        load_prompt_dataset(gsm8k_file)
    assert "rename 'question' to 'prompt'" in str(caught.value)
    assert "prompt column 'question'" in str(caught.value)


def test_prompt_column_turns_question_into_the_prompt(gsm8k_file):
    dataset = load_prompt_dataset(gsm8k_file, mapping=ColumnMapping(prompt_column="question"))

    assert dataset.columns == ["prompt", "answer"]
    assert dataset.prompt_kind == "text"
    assert dataset.rows == [{"prompt": r["question"], "answer": r["answer"]} for r in GSM8K_ROWS]


def test_system_prompt_makes_chat_prompts(gsm8k_file):
    dataset = load_prompt_dataset(gsm8k_file, mapping=ColumnMapping(prompt_column="question", system_prompt=SYSTEM))

    assert dataset.prompt_kind == "chat"
    assert dataset.rows[1]["prompt"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": GSM8K_ROWS[1]["question"]},
    ]
    assert dataset.rows[1]["answer"] == GSM8K_ROWS[1]["answer"]


def test_system_prompt_is_prepended_to_chat_prompts_without_one_and_keeps_their_own(tmp_path):
    own = [{"role": "system", "content": "mine"}, {"role": "user", "content": "2+2?"}]
    path = _write_jsonl(tmp_path / "chat.jsonl", [{"prompt": [{"role": "user", "content": "1+1?"}]}, {"prompt": own}])

    rows = load_prompt_dataset(path, mapping=ColumnMapping(system_prompt=SYSTEM)).rows

    assert rows[0]["prompt"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "1+1?"}]
    assert rows[1]["prompt"] == own


def test_renames_other_columns(tmp_path):
    path = _write_jsonl(tmp_path / "math.jsonl", [{"problem": "1+1?", "solution": "\\boxed{2}", "level": 1}])

    dataset = load_prompt_dataset(path, mapping=ColumnMapping(prompt_column="problem", renames={"solution": "answer"}))

    assert dataset.columns == ["prompt", "answer", "level"]
    assert dataset.rows == [{"prompt": "1+1?", "answer": "\\boxed{2}", "level": 1}]


def test_unknown_prompt_column_is_a_clear_error(gsm8k_file):
    with pytest.raises(DatasetError) as caught:
        load_prompt_dataset(gsm8k_file, mapping=ColumnMapping(prompt_column="problem"))
    assert str(caught.value) == (
        "gsm8k-train.jsonl: the column mapping (prompt_column) names column 'problem', which the file lacks; "
        "columns are question, answer"
    )


def test_unknown_renamed_column_is_a_clear_error(gsm8k_file):
    with pytest.raises(DatasetError, match=r"\(column_renames\) names column 'solution', which the file lacks"):
        load_prompt_dataset(gsm8k_file, mapping=ColumnMapping(prompt_column="question", renames={"solution": "x"}))


def test_mapping_onto_a_kept_column_is_refused(tmp_path):
    path = _write_jsonl(tmp_path / "both.jsonl", [{"prompt": "a", "question": "b"}])
    with pytest.raises(DatasetError, match=r"gives 2 columns the name 'prompt' \(prompt, question\)"):
        load_prompt_dataset(path, mapping=ColumnMapping(prompt_column="question"))


def test_parse_renames():
    assert parse_renames("solution=answer, id = problem_id\nlevel=difficulty") == {
        "solution": "answer", "id": "problem_id", "level": "difficulty"}
    assert parse_renames("  ") == {}
    with pytest.raises(ValueError, match="old=new"):
        parse_renames("solution")


# ------------------------------------------------------------------------------------- other ways to have a dataset
def test_json_array_file_with_a_mapping(tmp_path):
    path = tmp_path / "gsm8k.json"
    path.write_text(json.dumps(GSM8K_ROWS), encoding="utf-8")

    dataset = load_prompt_dataset(path, mapping=ColumnMapping(prompt_column="question"))

    assert dataset.format == "json"
    assert [r["prompt"] for r in dataset.rows] == [r["question"] for r in GSM8K_ROWS]


def _save_to_disk(folder: Path, rows: list[dict]) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
    return folder


def test_save_to_disk_folder_is_read_with_pyarrow(tmp_path):
    folder = _save_to_disk(tmp_path / "gsm8k-saved", GSM8K_ROWS)

    dataset = load_prompt_dataset(folder, mapping=ColumnMapping(prompt_column="question", system_prompt=SYSTEM))

    assert dataset.format == "arrow"
    assert dataset.source_name == "gsm8k-saved"
    assert dataset.columns == ["prompt", "answer"]
    assert [r["prompt"][1]["content"] for r in dataset.rows] == [r["question"] for r in GSM8K_ROWS]
    assert [r["answer"] for r in dataset.rows] == [r["answer"] for r in GSM8K_ROWS]


def test_dataset_dict_folder_names_its_splits(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "dd"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(GSM8K_ROWS),
                          "test": datasets.Dataset.from_list(GSM8K_ROWS[:1])}).save_to_disk(str(folder))

    with pytest.raises(DatasetError, match=r"several splits \(train, test\); choose one"):
        load_prompt_dataset(folder, mapping=ColumnMapping(prompt_column="question"))
    assert load_prompt_dataset(folder / "test", mapping=ColumnMapping(prompt_column="question")).num_rows == 1


def test_zipped_save_to_disk_folder_is_imported(store, settings, tmp_path):
    folder = _save_to_disk(tmp_path / "gsm8k-saved", GSM8K_ROWS)
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for file in folder.iterdir():
            archive.write(file, f"gsm8k-saved/{file.name}")

    info = import_dataset(store, settings, upload, source_name="gsm8k.zip",
                          mapping=ColumnMapping(prompt_column="question"))

    assert (info.name, info.format, info.num_rows, info.columns) == ("gsm8k", "arrow", 2, ["prompt", "answer"])
    assert read_normalized(Path(info.path))[0]["prompt"] == GSM8K_ROWS[0]["question"]


def test_hub_dataset_offline_is_a_clear_error(store, settings, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError, match=r"^openai/gsm8k:main:train: cannot load it from the hub .*network"):
        import_hub_dataset(store, settings, "openai/gsm8k", config="main", split="train",
                           mapping=ColumnMapping(prompt_column="question"))
    assert store.list_datasets() == []
    with pytest.raises(DatasetError, match="owner/name"):
        import_hub_dataset(store, settings, "not a/valid/id")


# ------------------------------------------------------------------------------------ upload to a launched run
def test_gsm8k_upload_with_mapping_to_a_launched_run_config(store, settings, gsm8k_file, tiny_model_dir):
    mapping = ColumnMapping(prompt_column="question", system_prompt=SYSTEM)
    info = import_dataset(store, settings, gsm8k_file, source_name="gsm8k-train.jsonl", mapping=mapping)
    assert (info.columns, info.prompt_kind) == (["prompt", "answer"], "chat")

    config = RunConfig(model=str(tiny_model_dir), dataset_id=info.id, rewards=NUMERIC_ONLY)
    assert validate_run_config(store, config, model_cache_dir=settings.model_cache_dir) == []
    run = submit_run(store, config, model_cache_dir=settings.model_cache_dir).run

    rows = load_rows(store, store.get_run(run.id).config)
    assert rows[0]["prompt"] == [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": GSM8K_ROWS[0]["question"]}]
    assert rows[0]["answer"].endswith("#### 72")


def test_mapping_in_the_run_config(store, gsm8k_file, tiny_model_dir):
    config = RunConfig.model_validate({
        "model": str(tiny_model_dir), "dataset_path": str(gsm8k_file), "rewards": NUMERIC_ONLY,
        "prompt_column": "question", "system_prompt": SYSTEM, "column_renames": {},
    })
    assert validate_run_config(store, config) == []
    rows = load_rows(store, config)
    assert rows[1]["prompt"][1] == {"role": "user", "content": GSM8K_ROWS[1]["question"]}
    assert "prompt_column: question" in config.to_yaml()


def test_bad_mapping_in_the_run_config_is_refused_before_launch(store, gsm8k_file, tiny_model_dir):
    config = RunConfig(model=str(tiny_model_dir), dataset_path=str(gsm8k_file), rewards=NUMERIC_ONLY,
                       prompt_column="problem")
    with pytest.raises(ConfigError, match=r"^dataset: gsm8k-train.jsonl: the column mapping \(prompt_column\) "
                                          r"names column 'problem', which the file lacks; columns are question"):
        submit_run(store, config)
    assert store.list_runs() == []


def test_reward_columns_are_checked_after_the_mapping(store, tmp_path, tiny_model_dir):
    path = _write_jsonl(tmp_path / "math.jsonl", [{"problem": "1+1?", "solution": "2"}])
    config = RunConfig(model=str(tiny_model_dir), dataset_path=str(path), rewards=NUMERIC_ONLY,
                       prompt_column="problem")
    with pytest.raises(ConfigError, match="reads column 'answer', which the dataset lacks; its columns are prompt"):
        validate_run_config(store, config)
    fixed = config.model_copy(update={"column_renames": {"solution": "answer"}})
    assert validate_run_config(store, fixed) == []


# ----------------------------------------------------------------------------- the prompt as the model gets it
def test_chat_template_rendered_as_transformers_renders_it(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model_text = read_model_text(tiny_model_dir)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": GSM8K_ROWS[0]["question"]}]

    rendered = model_prompt_text(messages, model_text)

    assert rendered == tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>assistant\n")
    assert model_prompt_text("plain text", model_text) == "plain text"
    assert model_text.max_position_embeddings == 1024


def test_preview_shows_the_rendered_prompt_or_says_why_not(tiny_model_dir, tmp_path):
    rows = [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "1+1?"}]}]
    shown, note = preview_model_prompts(rows, str(tiny_model_dir), None)
    assert note is None
    assert shown == [f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
                     "<|im_start|>assistant\n"]

    shown, note = preview_model_prompts(rows, "SmolLM2-135M-Instruct", tmp_path / "empty-cache")
    assert "not on disk yet" in note
    assert json.loads(shown[0]) == rows[0]["prompt"]


def test_token_counts_match_the_tokenizer_trl_uses(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    rows = [{"prompt": "What is 12 + 30?"}, {"prompt": [{"role": "user", "content": "What is 1 + 1?"}]}]
    check = check_prompt_lengths(rows, read_model_text(tiny_model_dir), max_completion_length=16)

    expected = [
        len(tokenizer("What is 12 + 30?", add_special_tokens=False)["input_ids"]),
        len(tokenizer(tokenizer.apply_chat_template(rows[1]["prompt"], tokenize=False, add_generation_prompt=True),
                      add_special_tokens=False)["input_ids"]),
    ]
    assert sorted((p.row_index, p.tokens) for p in check.longest) == [(0, expected[0]), (1, expected[1])]
    assert check.too_long == [] and check.context == 1024 and check.prompt_budget == 1008


# ------------------------------------------------------------------------------------------ too-long prompts
def _summands(count: int) -> str:
    return "Add these numbers: " + " + ".join(str(7 + i % 90) for i in range(count)) + " = ?"


@pytest.fixture
def long_prompts_file(tmp_path) -> Path:
    rows = [{"question": "What is 1 + 1?", "answer": "2"},
            {"question": _summands(3000), "answer": "0"},
            {"question": "What is 2 + 2?", "answer": "4"},
            {"question": _summands(600), "answer": "0"}]
    return _write_jsonl(tmp_path / "long.jsonl", rows)


def test_too_long_prompts_are_refused_before_launch_naming_rows(store, long_prompts_file, tiny_model_dir):
    config = RunConfig(model=str(tiny_model_dir), dataset_path=str(long_prompts_file), rewards=NUMERIC_ONLY,
                       prompt_column="question", max_completion_length=64)
    check = check_prompt_lengths(load_rows(store, config), read_model_text(tiny_model_dir), 64)
    assert [p.row_index for p in check.too_long] == [1, 3]
    long_tokens, mid_tokens = check.too_long[0].tokens, check.too_long[1].tokens
    assert long_tokens > mid_tokens > 1024 - 64

    with pytest.raises(ConfigError) as caught:
        submit_run(store, config)
    assert str(caught.value) == (
        f"dataset: 2 of 4 prompts are too long for the model: its context is 1,024 tokens "
        f"(max_position_embeddings) and max_completion_length = 64 leaves 960 tokens for a prompt; "
        f"row 1: {long_tokens:,} tokens, row 3: {mid_tokens:,} tokens (rows numbered from 0). "
        "Shorten or drop those rows, or lower max_completion_length."
    )
    assert store.list_runs() == []


def test_require_prompts_fit_raises_with_the_check(tiny_model_dir):
    rows = [{"prompt": "short"}, {"prompt": _summands(3000)}]
    with pytest.raises(PromptTooLongError) as caught:
        require_prompts_fit(rows, tiny_model_dir, 64)
    assert [p.row_index for p in caught.value.check.too_long] == [1]
    assert require_prompts_fit(rows[:1], tiny_model_dir, 64).too_long == []


def test_load_upload_checks_without_storing(store, settings, gsm8k_file):
    dataset = load_upload(gsm8k_file, source_name="gsm8k-train.jsonl", max_upload_mb=settings.max_upload_mb,
                          mapping=ColumnMapping(prompt_column="question"))
    assert dataset.num_rows == 2
    assert store.list_datasets() == []


def test_gguf_model_text_folder_is_the_converted_folder_in_the_cache(tmp_path, tiny_model_dir):
    import hashlib
    import shutil

    from grpo_core.models.prompt_lengths import model_text_folder

    gguf = tmp_path / "Tiny.Q4.gguf"
    gguf.write_bytes(b"GGUF not really")
    cache = tmp_path / "models"
    assert model_text_folder(str(gguf), cache) is None  # not converted yet: nothing to read
    converted = cache / f"Tiny.Q4-{hashlib.sha256(gguf.read_bytes()).hexdigest()[:16]}"  # convert_gguf's name
    shutil.copytree(tiny_model_dir, converted)

    assert model_text_folder(str(gguf), cache) == converted
    assert model_text_folder(str(gguf), None) is None
    assert model_text_folder("owner/some-hub-model", cache) is None
