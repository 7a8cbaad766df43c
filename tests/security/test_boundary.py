"""The boundary's checks without a server (:mod:`grpo_core.access.boundary`): plugin targets, dataset and model paths,
``trust_remote_code``, the auth file's ``[run-code]`` mark, ``state.json`` data files and zip members.

Each attack is a class: a path written in many ways (``..``, symbolic links, ``~``, URL-ish, a folder whose name
extends the allowed one), a target from anywhere but the admin's folders and packages.
"""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from grpo_core.access.boundary import OPEN, BoundaryError, boundary_for, plugin_files
from grpo_core.access.logins import AccessError, read_auth_admins, read_auth_code_runners, read_auth_file
from grpo_core.access.ownership import Actor
from grpo_core.datasets.formats import load_prompt_dataset
from grpo_core.datasets.library import _load_zipped_folder
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.rewards.compose import RewardSpec
from grpo_core.rewards.plugin import load_plugin_function
from grpo_core.run_config import RunConfig
from grpo_core.settings import load_settings

PLUGIN = "import os\nfrom subprocess import getoutput\n\n\ndef score(completions, **kw):\n    return [1.0] * len(completions)\n\n\nclass Scorer:\n    def __call__(self, completions, **kw):\n        return [0.0] * len(completions)\n"


@pytest.fixture
def world(tmp_path):
    """A data dir, a plugin folder with ``rewards.py`` and a package, a sibling ``plugins-evil``, an outside folder."""
    plugins = tmp_path / "plugins"
    (plugins / "pkg").mkdir(parents=True)
    (plugins / "rewards.py").write_text(PLUGIN)
    (plugins / "pkg" / "__init__.py").write_text("")
    (plugins / "pkg" / "mod.py").write_text(PLUGIN)
    evil = tmp_path / "plugins-evil"
    evil.mkdir()
    (evil / "rewards.py").write_text(PLUGIN)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text('{"prompt": "secret"}\n')
    (outside / "model").mkdir()
    (outside / "model" / "config.json").write_text("{}")
    (plugins / "link.py").symlink_to(evil / "rewards.py")
    settings = load_settings(data_dir=tmp_path / "data", plugin_dirs=[str(plugins)], plugin_packages=["math_verify"])
    settings.ensure_dirs()
    settings = settings.with_overrides(auth=(("alice", "a"), ("bob", "b"), ("root", "r")),
                                       code_runners=frozenset({"root"}))
    return settings, plugins, evil, outside


def _plugin(target: str) -> RunConfig:
    return RunConfig(dataset_id=1, rewards=[RewardSpec(rule="plugin", params={"target": target})])


def test_the_single_user_keeps_todays_freedom(world):
    settings, _, _, outside = world
    for boundary in (boundary_for(settings, Actor()), boundary_for(settings.with_overrides(auth=(("me", "p"),)),
                                                                   Actor("me"))):
        config = _plugin("os:system").model_copy(update={"dataset_path": str(outside / "secret.jsonl")})
        assert boundary.check_config(config) == config
    assert OPEN.check_rewards([RewardSpec(rule="plugin", params={"target": "subprocess:getoutput"})])


@pytest.mark.parametrize("target", [
    "os:system", "subprocess:getoutput", "builtins:exec", "posix:system", "pty:spawn", "runpy:run_path",
    "importlib:import_module", "code:interact", "ctypes:CDLL", "math_verify_evil:x", "mathverify:x",
    "rewards:os.system", "rewards:getoutput", "pkg.mod:os.system", "pkg:os",
])
def test_module_targets_outside_the_folders_and_packages_are_refused(world, target):
    settings, *_ = world
    with pytest.raises(BoundaryError, match="reward rule 1 \\(plugin\\)"):
        boundary_for(settings, Actor("alice")).check_config(_plugin(target))


def test_file_targets_resolve_inside_the_plugin_folders_only(world, tmp_path):
    settings, plugins, evil, outside = world
    alice = boundary_for(settings, Actor("alice"))
    refused = [
        f"{evil}/rewards.py:score",  # a folder whose name extends the allowed one
        f"{plugins}/../plugins-evil/rewards.py:score",
        f"{plugins}/link.py:score",  # a symbolic link out of the folder
        f"{outside}/nothing.py:score",  # absent: same refusal
        "~/rewards.py:score",
        "file:///etc/rewards.py:score",
        "rewards.py:score",  # relative to the server's working directory
        f"{plugins}/rewards.py:os.system",  # a name the file only imports
        f"{plugins}/rewards.py:getoutput",
    ]
    for target in refused:
        with pytest.raises(BoundaryError, match="plugin"):
            alice.check_config(_plugin(target))
    checked = alice.check_config(_plugin(f"{plugins}/./pkg/../rewards.py:score"))
    assert checked.rewards[0].params["target"] == f"{plugins.resolve()}/rewards.py:score"
    module = alice.check_config(_plugin("pkg.mod:Scorer")).rewards[0].params["target"]
    assert module == f"{(plugins / 'pkg' / 'mod.py').resolve()}:Scorer"  # imported as the file checked
    assert alice.check_config(_plugin("rewards:score")).rewards[0].params["target"].startswith(str(plugins))
    assert alice.check_config(_plugin("math_verify.parser:parse")).rewards[0].params["target"] == \
        "math_verify.parser:parse"
    root = boundary_for(settings, Actor("root"))  # [run-code]
    assert root.check_config(_plugin("os:system")).rewards[0].params["target"] == "os:system"


def test_dataset_and_model_paths_stay_inside_the_roots_and_refusals_do_not_tell_existence(world):
    settings, _, _, outside = world
    alice = boundary_for(settings, Actor("alice"))
    messages = set()
    for path in (outside / "secret.jsonl", outside / "absent.jsonl", "/etc/shadow", "/nonexistent/x.jsonl"):
        with pytest.raises(BoundaryError) as caught:
            alice.check_config(RunConfig(dataset_path=str(path)))
        messages.add(str(caught.value).replace(repr(str(path)), "PATH"))
    for path in (f"{settings.data_dir}/../outside/secret.jsonl", "~/secret.jsonl", "file:///etc/passwd"):
        with pytest.raises(BoundaryError) as caught:
            alice.check_config(RunConfig(dataset_path=path))
        messages.add(str(caught.value).replace(repr(path), "PATH"))
    assert len(messages) == 1, messages
    link = settings.data_dir / "datasets" / "link.jsonl"
    link.symlink_to(outside / "secret.jsonl")
    with pytest.raises(BoundaryError):
        alice.check_config(RunConfig(dataset_path=str(link)))
    inside = settings.data_dir / "datasets" / "mine.jsonl"
    inside.write_text('{"prompt": "hi"}\n')
    assert alice.check_config(RunConfig(dataset_path=str(inside))).dataset_path == str(inside.resolve())

    model_messages = set()
    for model in (str(outside / "model"), "/nonexistent/model", str(outside / "m.gguf"), "../../model", "~/m"):
        with pytest.raises(BoundaryError) as caught:
            alice.check_config(RunConfig(dataset_id=1, model=model))
        model_messages.add(str(caught.value).replace(repr(model), "PATH"))
    assert len(model_messages) == 1, model_messages
    spec = RewardSpec(rule="reward_model", params={"model": str(outside / "model")})
    with pytest.raises(BoundaryError, match="reward_model"):
        alice.check_config(RunConfig(dataset_id=1, rewards=[spec, RewardSpec(rule="numeric_answer")]))
    assert alice.check_config(RunConfig(dataset_id=1, model="org/name")).model == "org/name"  # hub id


@pytest.mark.parametrize("trl_args", [
    {"model_init_kwargs": {"trust_remote_code": True}},
    {"model_init_kwargs": '{"Trust_Remote_Code": true}'},
    {"generation_kwargs": {"nested": [{"trust_remote_code": 1}]}},
])
def test_trust_remote_code_needs_an_admin(world, trl_args):
    settings, *_ = world
    config = RunConfig(dataset_id=1, trl_args=trl_args)
    with pytest.raises(BoundaryError, match="trust_remote_code"):
        boundary_for(settings, Actor("alice")).check_config(config)
    boundary_for(settings, Actor("root")).check_config(config)
    boundary_for(settings.with_overrides(allow_remote_code=True), Actor("alice")).check_config(config)


def test_a_path_valued_trl_arg_is_refused_as_text(world):
    settings, *_ = world
    with pytest.raises(BoundaryError, match="deepspeed"):
        boundary_for(settings, Actor("alice")).check_config(RunConfig(dataset_id=1, trl_args={"deepspeed": "/x.json"}))


def test_plugin_files_are_listed_with_their_sha256(world):
    _, plugins, *_ = world
    listed = {item.path.name: item.sha256 for item in plugin_files([plugins.resolve()])}
    assert set(listed) == {"rewards.py"}  # link.py leads outside: not listed
    import hashlib
    assert listed["rewards.py"] == hashlib.sha256(PLUGIN.encode()).hexdigest()


def test_a_plugin_attribute_may_not_walk_through_another_module(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(PLUGIN)
    with pytest.raises(ValueError, match="another module"):
        load_plugin_function(f"{path}:os.system")
    with pytest.raises(ValueError, match="another module"):
        load_plugin_function("os:path.join")
    assert load_plugin_function(f"{path}:score")(completions=["a"]) == [1.0]


def test_the_auth_file_marks(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("[admin] a:1\n[run-code] b:2\n[admin] [run-code] c:3\nd:4\n[x]e:5\n")
    assert read_auth_admins(path) == {"a", "c"}
    assert read_auth_code_runners(path) == {"b", "c"}
    assert [u for u, _ in read_auth_file(path)] == ["a", "b", "c", "d", "[x]e"]
    path.write_text("[run_code] b:2\n")
    with pytest.raises(AccessError, match="unknown mark"):
        read_auth_file(path)


def _arrow_bytes() -> bytes:
    import pyarrow as pa

    sink = io.BytesIO()
    table = pa.table({"prompt": ["outside row"]})
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


@pytest.mark.parametrize("name_of", [
    lambda outside: str(outside / "data.arrow"),
    lambda outside: "../outside/data.arrow",
    lambda outside: "sub/../../outside/data.arrow",
    lambda outside: str(outside / "absent.arrow"),
])
def test_state_json_data_files_stay_inside_the_folder(tmp_path, name_of):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.arrow").write_bytes(_arrow_bytes())
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": name_of(outside)}]}))
    with pytest.raises(DatasetError, match="state.json lists the data file") as caught:
        load_prompt_dataset(folder)
    assert "No such file" not in str(caught.value) and "exist" not in str(caught.value)


def test_a_symlinked_data_file_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.arrow").write_bytes(_arrow_bytes())
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "data.arrow").symlink_to(outside / "data.arrow")
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data.arrow"}]}))
    with pytest.raises(DatasetError, match="outside the dataset folder"):
        load_prompt_dataset(folder)
    os.remove(folder / "state.json")  # without state.json the *.arrow files found are not followed either
    with pytest.raises(DatasetError):
        load_prompt_dataset(folder)


@pytest.mark.parametrize("member", ["/abs/data.arrow", "../data.arrow", "a/../../data.arrow", "C:/data.arrow",
                                    "link.arrow"])
def test_zip_members_outside_the_folder_or_symlinks_are_refused(tmp_path, member):
    path = tmp_path / "upload.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", json.dumps({"_data_files": [{"filename": "data.arrow"}]}))
        archive.writestr("data.arrow", _arrow_bytes())
        info = zipfile.ZipInfo(member)
        if member == "link.arrow":
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd" if member == "link.arrow" else _arrow_bytes())
    with pytest.raises(DatasetError, match="zip member"):
        _load_zipped_folder(Path(path), "upload.zip", 10, None)


def test_a_hub_dataset_id_never_names_a_server_folder(store, settings, tmp_path, monkeypatch):
    """``datasets.load_dataset`` loads a name that is a local folder from there; the id is loaded from an empty
    folder, so the server's folders (its working directory's, the data directory) stay out of reach."""
    from grpo_core.datasets.library import import_hub_dataset

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = tmp_path / "work" / "team" / "private"
    local.mkdir(parents=True)
    (local / "train.jsonl").write_text('{"prompt": "SERVER-FILE"}\n')
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(DatasetError, match="cannot load it from the hub"):
        import_hub_dataset(store, settings, "team/private", timeout_s=120)
    for name in ("..", "team/..", "./team", "."):
        with pytest.raises(DatasetError, match="owner/name"):
            import_hub_dataset(store, settings, name)
    assert store.list_datasets() == []


def test_the_boundary_settings_from_flags_and_environment(tmp_path, monkeypatch):
    (tmp_path / "p1").mkdir()
    (tmp_path / "p2").mkdir()
    monkeypatch.setenv("GRPO_PLUGIN_DIRS", f"{tmp_path / 'p1'}{os.pathsep}{tmp_path / 'p2'}")
    monkeypatch.setenv("GRPO_PLUGIN_PACKAGES", "math_verify, my_rewards.sub")
    monkeypatch.setenv("GRPO_DATASET_ROOTS", str(tmp_path / "p1"))
    monkeypatch.setenv("GRPO_ALLOW_REMOTE_CODE", "1")
    settings = load_settings(data_dir=tmp_path / "data")
    assert settings.plugin_dirs == ((tmp_path / "p1").resolve(), (tmp_path / "p2").resolve())
    assert settings.plugin_packages == ("math_verify", "my_rewards.sub")
    assert settings.dataset_roots == ((tmp_path / "p1").resolve(),) and settings.model_roots == ()
    assert settings.allow_remote_code
    flags = load_settings(data_dir=tmp_path / "data", plugin_dirs=[str(tmp_path / "p2")], allow_remote_code=False)
    assert flags.plugin_dirs == ((tmp_path / "p2").resolve(),) and not flags.allow_remote_code
    with pytest.raises(ValueError, match="--model-root .*not an existing folder"):
        load_settings(data_dir=tmp_path / "data", model_roots=[str(tmp_path / "absent")])
    with pytest.raises(ValueError, match="--plugin-package"):
        load_settings(data_dir=tmp_path / "data", plugin_packages=["os; rm"])


def test_serve_flags_reach_the_settings(tmp_path, monkeypatch):
    import app.cli.main as cli

    (tmp_path / "plugins").mkdir()
    auth = tmp_path / "users.txt"
    auth.write_text("[admin] a:1\n[run-code] b:2\nc:3\n")
    seen = {}
    monkeypatch.setattr("app.server.serve", lambda settings, **kw: seen.update(settings=settings, **kw))
    for name in ("GRPO_PLUGIN_DIRS", "GRPO_PLUGIN_PACKAGES", "GRPO_ALLOW_REMOTE_CODE"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["serve", "--data-dir", str(tmp_path / "data"), "--auth-file", str(auth), "--plugin-dir",
                     str(tmp_path / "plugins"), "--plugin-package", "math_verify", "--allow-remote-code"]) == 0
    settings = seen["settings"]
    assert [str(p) for p in seen["private_files"]] == [str(auth)]  # Gradio is kept from the auth file
    assert settings.plugin_dirs == ((tmp_path / "plugins").resolve(),)
    assert settings.plugin_packages == ("math_verify",) and settings.allow_remote_code
    assert settings.code_runners == {"b"} and settings.admins == {"a"}


@pytest.mark.parametrize(("target", "allowed"), [
    ("json:loads", True), ("json.decoder:JSONDecoder", True), ("math_verify:parse", True),
    ("json:codecs", False),  # a module json imports
    ("json.decoder:re", False), ("json.decoder:scanstring", True),
    ("jsonschema_evil:x", False), ("json_x:loads", False),  # a name that only starts like an allowed package
    ("subprocess:getoutput", False), ("os.path:join", False),
])
def test_allowed_packages_give_only_what_they_define(target, allowed):
    from grpo_core.access.boundary import Boundary

    boundary = Boundary(enforced=True, plugin_packages=("json", "math_verify"))
    if allowed:
        assert boundary.plugin_target(target, "rule") == target
    else:
        with pytest.raises(BoundaryError):
            boundary.plugin_target(target, "rule")


def test_a_stored_config_is_checked_even_when_it_no_longer_validates(world):
    settings, plugins, _, outside = world
    alice = boundary_for(settings, Actor("alice"))
    old = {"dataset_path": str(outside / "secret.jsonl"), "field_of_an_old_version": 1, "rewards": []}
    with pytest.raises(BoundaryError, match="cannot export this run: dataset_path"):
        alice.check_stored(old, "export")
    with pytest.raises(BoundaryError, match="cannot resume this run: reward rule 2 \\(plugin\\)"):
        alice.check_stored({"dataset_id": 1, "rewards": [{"rule": "numeric_answer"},
                                                          {"rule": "plugin", "params": {"target": "os:system"}}]},
                           "resume")
    alice.check_stored({"dataset_id": 1, "model": "SmolLM2-135M-Instruct", "rewards": [
        {"rule": "plugin", "params": {"target": f"{plugins.resolve()}/rewards.py:score"}}]}, "merge")
    OPEN.check_stored(old, "export")


def test_the_open_boundary_passes_every_single_check_through(tmp_path):
    assert OPEN.model(str(tmp_path), "model") == str(tmp_path)
    assert OPEN.dataset_file("/etc/x.jsonl", "dataset_path") == Path("/etc/x.jsonl")
    assert OPEN.plugin_target("os:system", "rule") == "os:system"
    OPEN.check_trl_args({"model_init_kwargs": {"trust_remote_code": True}, "deepspeed": "/x.json"})


def test_a_plugin_folder_where_logins_can_write_is_refused_at_start(tmp_path, monkeypatch):
    """A plugin folder that is, holds or lies in the data directory or Gradio's upload cache would let any login
    write a plugin file (an upload lands there)."""
    uploads = tmp_path / "gradio-uploads"
    (uploads / "abc").mkdir(parents=True)
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))
    data = tmp_path / "data"
    (data / "datasets").mkdir(parents=True)
    for folder in (data, data / "datasets", tmp_path, uploads, uploads / "abc"):
        with pytest.raises(ValueError, match="--plugin-dir .*overlaps"):
            load_settings(data_dir=data, plugin_dirs=[str(folder)])
    (tmp_path / "plugins").mkdir()
    assert load_settings(data_dir=data, plugin_dirs=[str(tmp_path / "plugins")]).plugin_dirs


def test_every_sweep_point_is_checked_before_any_is_validated(store, settings, tmp_path):
    from grpo_core.access.boundary import Boundary
    from grpo_core.submit.sweeps import submit_sweep

    inside = settings.data_dir / "datasets" / "mine.jsonl"
    inside.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"prompt": "SECRET", "answer": "1"}\n')
    boundary = Boundary(enforced=True, dataset_roots=(settings.data_dir.resolve(),))
    with pytest.raises(BoundaryError, match="sweep point .*dataset_path.*nothing was launched"):
        submit_sweep(store, RunConfig(dataset_path=str(inside)), {"dataset_path": [str(inside), str(outside)]},
                     boundary=boundary)
    assert store.list_runs() == []


@pytest.mark.parametrize("trl_args", [
    {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": "http://127.0.0.1:7860"},
    {"use_vllm": True, "vllm_mode": "server", "vllm_server_host": "169.254.169.254", "vllm_server_port": 80},
    {"log_completions": True, "log_completions_hub_repo": "attacker/completions"},
    {"trackio_space_id": "attacker/space"},
    {"hub_token": "hf_x"},
    {"model_init_kwargs": {"cache_dir": "/home/server/.ssh"}},
    {"model_init_kwargs": {"offload_folder": "/srv"}},
    {"model_init_kwargs": {"gguf_file": "/etc/shadow"}},
    {"model_init_kwargs": {"weights_only": False}},
    {"model_init_kwargs": {"proxies": {"https": "http://10.0.0.1:3128"}}},
    {"model_init_kwargs": '{"cache_dir": "/tmp/elsewhere"}'},
    {"model_init_kwargs": {"attn_implementation": "kernels-community/flash-attn"}},
    {"deepspeed": {"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/srv"}}}},
    {"deepspeed": '{"csv_monitor": {"enabled": true, "output_path": "/var/www/"}}'},
    {"generation_kwargs": {"custom_generate": "transformers-community/dola"}},
    {"dataloader_num_workers": 100_000},
], ids=lambda a: next(iter(a.keys() - {"use_vllm", "vllm_mode", "log_completions"})))
def test_trl_args_naming_hosts_files_credentials_or_code_need_an_admin(world, trl_args):
    """Fields and keys that send the worker to a host or the hub, or name a file, folder, credential or code of the
    server, are the admin's (or a [run-code] login's); ordinary settings stay open."""
    settings, *_ = world
    config = RunConfig(dataset_id=1, trl_args=trl_args)
    with pytest.raises(BoundaryError, match=r"trl_args\."):
        boundary_for(settings, Actor("alice")).check_config(config)
    boundary_for(settings, Actor("root")).check_config(config)
    OPEN.check_config(config)


def test_ordinary_trl_args_stay_open_to_logins(world):
    settings, *_ = world
    boundary_for(settings, Actor("alice")).check_config(RunConfig(dataset_id=1, trl_args={
        "model_init_kwargs": {"dtype": "bfloat16", "attn_implementation": "sdpa"},
        "generation_kwargs": {"eos_token_id": 2, "repetition_penalty": 1.1},
        "deepspeed": {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
                      "flops_profiler": {"enabled": False, "profile_step": 1}},
        "fsdp_config": {"transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]},
        "gradient_checkpointing_kwargs": {"use_reentrant": False}}))


def test_a_plugin_file_named_many_times_is_parsed_once_a_version(world, monkeypatch):
    """A config naming one plugin file in 64 tool plugins and 500 reward rules parses it once (each target parsed
    it again: 2,000 targets of a 178 KB file took 105 s of the web process's CPU); a new version of the file is
    parsed again, so a function it no longer defines is refused; more than 64 tool plugins are refused."""
    import ast

    from grpo_core.access import boundary as boundary_module
    from grpo_core.run_config import ConfigError, parse_run_config

    settings, plugins, _, _ = world
    boundary = boundary_for(settings, Actor("alice"))
    target = f"{plugins / 'rewards.py'}:score"
    parses = []
    original = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parses.append(1) or original(source, *a, **k))
    getattr(boundary_module, "_top_level_names", None) and boundary_module._top_level_names.cache_clear()
    config = RunConfig(dataset_id=1, tool_plugins=[target] * 64,
                       rewards=[RewardSpec(rule="plugin", params={"target": target})] * 500)
    checked = boundary.check_config(config)
    assert len(parses) == 1 and len(checked.rewards) == 500
    (plugins / "rewards.py").write_text(PLUGIN.replace("def score", "def other_score"))
    with pytest.raises(BoundaryError, match="does not define 'score'"):
        boundary.check_config(config)
    with pytest.raises(ConfigError, match="tool_plugins"):
        parse_run_config({"dataset_id": 1, "tool_plugins": [target] * 65}, source="config")
