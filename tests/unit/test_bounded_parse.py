"""Bounded parsing of user text (:mod:`grpo_core.bounded_parse`): the nasty YAML and JSON an attacker sends (nested
aliases, merge keys, tags, deep nesting, huge scalars, too many values, repeated keys) refused with a message naming
what is wrong and where, through the module and through every caller that reads user text (run configs, sweeps,
the Launch form's fields, the Try tab's prompt); what users write still reads as before."""

from __future__ import annotations

import pytest

from grpo_core.bounded_parse import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_TEXT_BYTES,
    ParseError,
    ParseLimits,
    dump_yaml,
    load_json,
    load_yaml,
)
from grpo_core.datasets.rows import prompt_from_text
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config_text
from grpo_core.submit.sweeps import SweepError, parse_grid_text, parse_sweep_config_text


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """The classic: each level a list of ``width`` aliases of the one before (``width ** levels`` leaves)."""
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = ["a: &a [" + ",".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        name, previous = names[level], names[level - 1]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * width) + "]")
    return "\n".join(lines) + "\n"


def billion_laughs_config(size: int = 577) -> str:
    """A run config of ``size`` bytes (the issue's was 577) carrying the laughs under ``trl_args``, a field that
    accepts any mapping, padded with a comment."""
    text = "max_steps: 1\ntrl_args:\n  x:\n    " + billion_laughs().replace("\n", "\n    ").rstrip() + "\n"
    return text + "#" * (size - len(text) - 1) + "\n"


def test_the_issues_577_byte_attack_is_refused_at_its_first_alias():
    attack = billion_laughs_config()
    assert len(attack.encode()) == 577
    with pytest.raises(ParseError, match=r"config, line 2, column 8: YAML alias \*a refused"):
        load_yaml(billion_laughs())
    with pytest.raises(ConfigError, match=r"^api, line 5, column 12: YAML alias \*a refused: aliases can expand"):
        parse_run_config_text(attack, source="api")


NASTY_YAML = [
    ("alias", "a: &x 1\nb: *x\n", r"line 2, column 4: YAML alias \*x refused"),
    ("alias in a flow list", "a: &x [1]\nb: [*x, *x]\n", r"line 2, column 5: YAML alias \*x refused"),
    ("alias as a key", "a: &k key\n*k : 1\n", r"line 2, column 1: YAML alias \*k refused"),
    ("merge key with an alias", "base: &b {beta: 0.1}\nrun:\n  <<: *b\n", r"line 3, column 3: YAML merge key"),
    ("merge key inline", "run:\n  <<: {beta: 0.1}\n", r"line 2, column 3: YAML merge key << refused"),
    ("merge key list", "run:\n  <<: [{a: 1}, {b: 2}]\n", r"merge key << refused"),
    ("python tag", "a: !!python/object/apply:os.system ['id']\n", r"tag !!python/object/apply:os.system refused"),
    ("python name tag", "a: !!python/name:os.system\n", r"tag !!python/name:os.system refused"),
    ("binary tag", "a: !!binary aGVsbG8=\n", r"tag !!binary refused"),
    ("set tag", "a: !!set {x, y}\n", r"tag !!set refused"),
    ("omap tag", "a: !!omap [{x: 1}]\n", r"tag !!omap refused"),
    ("timestamp tag", "a: !!timestamp 2024-01-01\n", r"tag !!timestamp refused"),
    ("local tag", "a: !pwn x\n", r"line 1, column 4: YAML tag !pwn refused"),
    ("verbatim tag", "a: !<tag:evil.com,2024:x> 1\n", r"tag tag:evil.com,2024:x refused"),
    ("deep flow lists", "[" * 5000 + "]" * 5000, rf"line 1, column \d+: nested deeper than {MAX_DEPTH} levels"),
    ("deep flow lists within libyaml's limit", "[" * 500 + "]" * 500, rf"column {MAX_DEPTH + 1}: nested deeper"),
    ("deep flow maps", "{a: " * 200 + "1" + "}" * 200, rf"nested deeper than {MAX_DEPTH} levels"),
    ("deep block maps", "".join(" " * i + "a:\n" for i in range(60)) + " " * 60 + "1\n", "nested deeper"),
    ("deep block lists", "- " * 200 + "1\n", "nested deeper"),
    ("too many values", "[" + ", ".join(["1"] * (MAX_NODES + 1)) + "]", rf"more than {MAX_NODES:,} values"),
    ("huge scalar", "a: " + "x" * MAX_TEXT_BYTES, rf"over the limit of {MAX_TEXT_BYTES:,} bytes"),
    ("huge multibyte scalar", "a: " + "é" * (MAX_TEXT_BYTES // 2), "bytes is over the limit"),
    ("huge integer", "a: " + "9" * 5000, "a value cannot be read"),
    ("repeated key", "beta: 0.1\nbeta: 0.2\n", r"line 2, column 1: .*'beta' is given twice"),
    ("syntax error", "a: [1, 2\n", r"not valid YAML"),
]


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in NASTY_YAML], ids=[c[0] for c in NASTY_YAML])
def test_nasty_yaml_is_refused_with_a_message_naming_the_problem(text, message):
    with pytest.raises(ParseError, match=message) as caught:
        load_yaml(text, source="my config")
    assert str(caught.value).startswith("my config")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in NASTY_YAML], ids=[c[0] for c in NASTY_YAML])
def test_every_config_reader_refuses_them(text, message):
    """The API's run config and sweep, the Launch tab's sweep grid and its other-GRPOConfig-fields box."""
    from app.tabs.launch.form import parse_trl_args_text

    with pytest.raises(ConfigError, match=message):
        parse_run_config_text(text, source="config")
    with pytest.raises(ConfigError, match=message):
        parse_sweep_config_text(text, source="config")
    with pytest.raises(SweepError, match=message):
        parse_grid_text(text)
    with pytest.raises(ConfigError, match=message):
        parse_trl_args_text(text)


def test_the_limits_apply_before_the_value_is_built():
    """A tight node limit stops a text long before its end: nothing past the limit is composed."""
    text = "[" + ", ".join(str(i) for i in range(1000)) + "]"
    with pytest.raises(ParseError, match=r"line 1, column \d+: more than 10 values"):
        load_yaml(text, limits=ParseLimits(max_nodes=10))
    assert len(load_yaml(text)) == 1000
    with pytest.raises(ParseError, match="reading took over 0 s"):
        load_yaml(text, limits=ParseLimits(max_seconds=0))


def test_what_users_write_still_reads():
    assert load_yaml("") is None
    assert load_yaml("beta: 0.04\nrewards:\n  - {rule: numeric_answer, weight: 1}\n") == {
        "beta": 0.04, "rewards": [{"rule": "numeric_answer", "weight": 1}]}
    assert load_yaml('{"max_steps": 5, "name": "json is yaml"}') == {"max_steps": 5, "name": "json is yaml"}
    assert load_yaml("a: &unused 1\nn: !!str 5\nm: !!int '7'\n") == {"a": 1, "n": "5", "m": 7}  # an anchor alone
    assert load_yaml("name: 2024-01-01\nwhen: 2024-01-01 10:00:00\n") == {
        "name": "2024-01-01", "when": "2024-01-01 10:00:00"}  # dates stay text
    assert load_yaml("quoted: '<<'\n") == {"quoted": "<<"}
    nested = "a:\n" + "".join("  " * i + "  b:\n" for i in range(MAX_DEPTH - 3)) + "  " * (MAX_DEPTH - 1) + "1\n"
    assert load_yaml(nested) is not None  # MAX_DEPTH levels exactly
    config = parse_run_config_text(RunConfig(name="x", trl_args={"num_generations_eval": 2}).to_yaml())
    assert config.name == "x"


def test_what_is_not_text_is_refused():
    for value in ({"max_steps": 1}, ["x"], b"max_steps: 1", 5):
        with pytest.raises(ParseError, match=f"^config: expected text, got {type(value).__name__}"):
            load_yaml(value)
        with pytest.raises(ParseError, match="expected text"):
            load_json(value)


def test_configs_are_written_without_anchors_and_read_back():
    shared = {"pattern": "^a$"}
    text = dump_yaml({"first": shared, "second": shared, "list": [shared, shared]})
    assert "&" not in text and "*" not in text
    assert load_yaml(text) == {"first": shared, "second": shared, "list": [shared, shared]}


NASTY_JSON = [
    ("deep", "[" * 40 + "]" * 40, f"nested deeper than {MAX_DEPTH} levels"),
    ("deeper than the interpreter", "[" * 30000 + "]" * 30000, "nested deeper than"),
    ("too many values", "[" + ",".join(["1"] * (MAX_NODES + 1)) + "]", f"more than {MAX_NODES:,} values"),
    ("huge", '{"a": "' + "x" * MAX_TEXT_BYTES + '"}', "bytes is over the limit"),
    ("huge integer", "9" * 5000, "a value cannot be read"),
    ("repeated key", '{"weight": 1, "weight": 2}', "key 'weight' is given twice"),
    ("syntax", '{"a": 1,\n "b": }', r"line 2, column 7: not valid JSON \(Expecting value\)"),
]


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in NASTY_JSON], ids=[c[0] for c in NASTY_JSON])
def test_nasty_json_is_refused(text, message):
    with pytest.raises(ParseError, match=message) as caught:
        load_json(text, source="parameters")
    assert str(caught.value).startswith("parameters")


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in NASTY_JSON], ids=[c[0] for c in NASTY_JSON])
def test_the_launch_forms_json_fields_refuse_them(text, message):
    from app.tabs.launch.form import form_to_config

    with pytest.raises(ConfigError, match=rf"reward rule 1 \(numeric_answer\): parameters.*{message}"):
        form_to_config({"rule_1": "numeric_answer", "weight_1": 1.0, "params_1": text})


def test_a_nasty_prompt_in_the_try_tab_is_text():
    """The Try tab reads a prompt starting with ``[`` as a message list when it is one; anything else is text."""
    deep = "[" * 30000 + "]" * 30000
    assert prompt_from_text(deep, chat=False) == deep
    assert prompt_from_text('[{"role": "user", "content": "hi"}]', chat=False) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_a_dataset_file_nested_past_the_interpreter_is_refused_with_its_line(tmp_path, suffix):
    """Dataset files are bounded by the upload limit, not by these: a line that Python's JSON reader cannot take
    (nested past its recursion limit, a 5,000-digit number) is a clear DatasetError, not a crash."""
    from grpo_core.datasets.formats import load_prompt_dataset
    from grpo_core.datasets.prompt_dataset import DatasetError

    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / f"rows{suffix}"
    if suffix == ".jsonl":
        path.write_text('{"prompt": "fine"}\n{"prompt": ' + deep + "}\n")
        expected = r"rows.jsonl, line 2: not readable JSON \(nested too deeply\)"
    elif suffix == ".json":
        path.write_text('[{"prompt": "fine", "n": ' + "9" * 5000 + "}]")
        expected = r"rows.json: not readable JSON \(Exceeds the limit"
    else:  # a CSV cell that looks like a message list stays text when it cannot be read
        path.write_text('prompt\n"' + deep + '"\n')
        assert load_prompt_dataset(path).rows[0]["prompt"] == deep
        return
    with pytest.raises(DatasetError, match=expected):
        load_prompt_dataset(path)
