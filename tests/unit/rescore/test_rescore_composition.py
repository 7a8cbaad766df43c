"""Reward presets (names cannot name a path, YAML round trip) and the launch config a rescoring gives."""

from __future__ import annotations

import pytest

from grpo_core.rescore.composition import launch_config, list_presets, load_preset, save_preset
from grpo_core.rescore.request import RescoreError, parse_rules_text
from grpo_core.run_config import ConfigError
from tests.rescore_fixtures import NEW_RULES


def test_a_preset_round_trips(tmp_path):
    path = save_preset(tmp_path, "gated-format", NEW_RULES)
    assert path.parent == tmp_path / "reward_presets"
    loaded = load_preset(tmp_path, "gated-format")
    assert [s["rule"] for s in loaded] == ["numeric_answer", "format_regex"]
    assert loaded[1]["gate"] == {"rule": "numeric_answer", "min": 1.0} and loaded[1]["weight"] == 0.5
    assert list_presets(tmp_path) == ["gated-format"]


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "/etc/passwd", ".hidden", "x" * 65, "a..b", "ok.", "é"])
def test_a_preset_name_cannot_name_a_path(tmp_path, name):
    with pytest.raises(RescoreError, match="preset name"):
        save_preset(tmp_path, name, NEW_RULES)
    assert not (tmp_path / "escape.yaml").exists()


def test_a_bad_composition_is_not_saved(tmp_path):
    with pytest.raises(ValueError, match="nope"):
        save_preset(tmp_path, "bad", [{"rule": "nope"}])
    assert list_presets(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "give a list"), ("rule: x", "give a list"), ("[1, 2]", "mapping"), ("[a: [", "rules"),
     ("- rule: numeric_answer\n" * 17, "at most 16")],
)
def test_rules_text_is_refused_clearly(text, message):
    with pytest.raises(RescoreError, match=message):
        parse_rules_text(text)


def test_rules_text_takes_a_list_or_a_config():
    assert parse_rules_text("- rule: numeric_answer\n") == [{"rule": "numeric_answer"}]
    assert parse_rules_text("name: x\nrewards:\n  - rule: length\n") == [{"rule": "length"}]


def test_launch_config_keeps_the_run_and_changes_the_rules():
    base = {"name": "demo", "model": "/m", "dataset_path": "/d.jsonl", "learning_rate": 2e-6,
            "rewards": [{"rule": "numeric_answer"}]}
    config = launch_config(base, NEW_RULES)
    assert config.name == "demo-rescored" and config.learning_rate == 2e-6 and config.model == "/m"
    assert [s.rule for s in config.rewards] == ["numeric_answer", "format_regex"]
    assert config.rewards[1].gate.rule == "numeric_answer"
    with pytest.raises(ConfigError):
        launch_config(base, [{"rule": "format_regex", "gate": {"rule": "missing"}}])
