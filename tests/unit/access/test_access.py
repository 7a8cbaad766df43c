"""Tests for a dashboard that may be exposed: login credentials (flag, environment, file), the warning on a
non-loopback address, the upload size limit, uploaded names never used as paths, allowed file types, and run
folders kept under the data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main as cli_main
from grpo_core.access.logins import (
    BYTES_PER_MB,
    AccessError,
    exposure_warnings,
    is_loopback,
    load_credentials,
    parse_credential,
    read_auth_file,
    redact_url,
    upload_too_large_message,
)
from grpo_core.datasets.library import UploadTooLargeError, import_dataset
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.runs.files import run_dir
from grpo_core.settings import load_auth, load_settings

ROWS = [{"prompt": "What is 1 + 1?", "answer": 2}, {"prompt": "What is 2 + 3?", "answer": 5}]


def _jsonl(path: Path, rows=ROWS) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("GRPO_AUTH", "GRPO_AUTH_FILE", "GRPO_MAX_UPLOAD_MB", "GRPO_HOST"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# --------------------------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice:secret", ("alice", "secret")),
        ("alice:pa:ss:word", ("alice", "pa:ss:word")),  # the password may hold colons
        (" alice :with space ", ("alice", "with space ")),  # the password is taken as written
    ],
)
def test_parse_credential(text, expected):
    assert parse_credential(text, "--auth") == expected


@pytest.mark.parametrize("text", ["alice", "alice:", ":secret", "  :secret", "", "al ice:secret"])
def test_malformed_credentials_are_refused_without_echoing_them(text):
    with pytest.raises(AccessError, match="^--auth: ") as info:
        parse_credential(text, "--auth")
    if text.partition(":")[2]:
        assert text.partition(":")[2] not in str(info.value)


def test_auth_file_lines_comments_and_blank_lines(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("# team\nalice:one\r\n\n  # bob left\ncarol:two:three\n", encoding="utf-8")
    assert read_auth_file(path) == [("alice", "one"), ("carol", "two:three")]


def test_auth_file_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("alice:one\nbob\n", encoding="utf-8")
    with pytest.raises(AccessError, match=r"users\.txt, line 2: expected USER:PASSWORD"):
        read_auth_file(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nobody\n", encoding="utf-8")
    with pytest.raises(AccessError, match="lists no user"):
        read_auth_file(empty)
    with pytest.raises(AccessError, match="cannot be read"):
        read_auth_file(tmp_path / "missing.txt")


def test_flag_and_file_combine_and_a_user_twice_is_refused(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("bob:two\n", encoding="utf-8")
    assert load_credentials("alice:one", path) == (("alice", "one"), ("bob", "two"))
    assert load_credentials() == ()
    with pytest.raises(AccessError, match="'bob' is listed twice"):
        load_credentials("bob:other", path)


def test_load_auth_reads_flags_before_the_environment(clean_env, tmp_path):
    assert load_auth() == ()
    clean_env.setenv("GRPO_AUTH", "env-user:env-pass")
    assert load_auth() == (("env-user", "env-pass"),)
    assert load_auth("flag-user:flag-pass") == (("flag-user", "flag-pass"),)
    path = tmp_path / "users.txt"
    path.write_text("filed:pw\n", encoding="utf-8")
    clean_env.setenv("GRPO_AUTH_FILE", str(path))
    assert load_auth() == (("env-user", "env-pass"), ("filed", "pw"))


def test_settings_never_show_the_passwords(clean_env, tmp_path):
    settings = load_settings(data_dir=tmp_path).with_overrides(auth=(("alice", "hunter2"),))
    assert "hunter2" not in repr(settings)
    assert settings.auth == (("alice", "hunter2"),)


def test_workers_do_not_read_the_credentials(clean_env, tmp_path):
    """A worker runs in its run folder: a relative GRPO_AUTH_FILE or a broken GRPO_AUTH must not stop it."""
    clean_env.setenv("GRPO_AUTH", "broken")
    clean_env.setenv("GRPO_AUTH_FILE", "relative/users.txt")
    assert load_settings(data_dir=tmp_path).auth == ()


# ------------------------------------------------------------------------------------------ upload limit


def test_upload_limit_setting_flag_environment_and_default(clean_env, tmp_path):
    assert load_settings(data_dir=tmp_path).max_upload_mb == 200
    clean_env.setenv("GRPO_MAX_UPLOAD_MB", "50")
    assert load_settings(data_dir=tmp_path).max_upload_mb == 50
    assert load_settings(data_dir=tmp_path, max_upload_mb=7).max_upload_mb == 7
    clean_env.setenv("GRPO_MAX_UPLOAD_MB", "lots")
    with pytest.raises(ValueError, match="GRPO_MAX_UPLOAD_MB='lots' is not a whole number"):
        load_settings(data_dir=tmp_path)
    with pytest.raises(ValueError, match="at least 1 MB"):
        load_settings(data_dir=tmp_path, max_upload_mb=0)


@pytest.mark.parametrize("value", [0, -2])
def test_max_concurrent_runs_below_one_is_refused(clean_env, tmp_path, value):
    clean_env.delenv("GRPO_MAX_CONCURRENT_RUNS", raising=False)
    assert load_settings(data_dir=tmp_path).max_concurrent_runs == 1
    with pytest.raises(ValueError, match=f"max concurrent runs must be at least 1, got {value}"):
        load_settings(data_dir=tmp_path, max_concurrent_runs=value)


@pytest.mark.parametrize(
    ("size", "limit", "expected"),
    [
        (312 * BYTES_PER_MB + 1000, 200, "doubles.jsonl is 312 MB; the limit is 200 MB"),
        (200 * BYTES_PER_MB, 200, None),
        (200 * BYTES_PER_MB + 5 * 1024, 200, "doubles.jsonl is 200.00 MB; the limit is 200 MB"),
        (int(2.5 * BYTES_PER_MB), 1, "doubles.jsonl is 2.5 MB; the limit is 1 MB"),
    ],
)
def test_upload_too_large_message(size, limit, expected):
    assert upload_too_large_message("doubles.jsonl", size, limit) == expected


def test_import_dataset_refuses_a_file_over_the_limit_and_stores_nothing(store, settings, tmp_path):
    upload = _jsonl(tmp_path / "gradio-tmp.jsonl", ROWS * 15_000)  # about 1.2 MB
    small = settings.with_overrides(max_upload_mb=1)
    size_mb = upload.stat().st_size / BYTES_PER_MB
    with pytest.raises(UploadTooLargeError) as info:
        import_dataset(store, small, upload, source_name="doubles.jsonl")
    assert str(info.value) == f"doubles.jsonl is {size_mb:.1f} MB; the limit is 1 MB"
    assert isinstance(info.value, DatasetError)  # the Datasets tab shows it like any invalid file
    assert store.list_datasets() == []
    assert list(settings.datasets_dir.iterdir()) == []
    assert import_dataset(store, settings, upload, source_name="doubles.jsonl").num_rows == 30_000


# ------------------------------------------------------------------------------- uploaded names and types


@pytest.mark.parametrize("uploaded", ["../../etc/passwd.jsonl", "/etc/passwd.jsonl"])
def test_uploaded_file_name_is_never_used_as_a_path(store, settings, tmp_path, uploaded):
    upload = _jsonl(tmp_path / "gradio-tmp.jsonl")
    info = import_dataset(store, settings, upload, source_name=uploaded)
    path = Path(info.path)
    assert path.parent == settings.datasets_dir  # a fresh uuid name in the datasets folder
    assert "passwd" not in path.name
    assert "/" not in info.source_name and info.source_name.endswith("passwd.jsonl")
    assert sorted(p.name for p in settings.datasets_dir.iterdir()) == [path.name]
    assert not (settings.data_dir.parent / "etc").exists()


@pytest.mark.parametrize("uploaded", ["prompts.exe", "prompts.jsonl.sh", "prompts", "prompts.py"])
def test_only_supported_file_types_are_imported(store, settings, tmp_path, uploaded):
    upload = _jsonl(tmp_path / uploaded)  # Gradio keeps the uploaded name on its temporary copy
    with pytest.raises(DatasetError, match="unsupported file type; use one of .jsonl, .json, .csv, .parquet"):
        import_dataset(store, settings, upload, source_name=uploaded)
    assert store.list_datasets() == []


# ------------------------------------------------------------------------------------------- run folders


def test_run_dir_lies_under_the_runs_folder(settings):
    assert run_dir(settings, 42) == settings.runs_dir / "run-00042"


@pytest.mark.parametrize("run_id", [0, -1, "../../etc", "1", True, 2.0])
def test_run_dir_refuses_what_is_not_a_run_id(settings, run_id):
    with pytest.raises(ValueError, match="positive whole number"):
        run_dir(settings, run_id)


def test_run_dir_refuses_a_link_out_of_the_data_directory(settings, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (settings.runs_dir / "run-00007").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="outside the runs folder"):
        run_dir(settings, 7)


# ------------------------------------------------------------------------------------ exposure and display


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_addresses(host):
    assert is_loopback(host)
    assert exposure_warnings(host, 7860, has_auth=False) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "dashboard.example.org", ""])
def test_non_loopback_without_login_warns_clearly(host):
    assert not is_loopback(host)
    (message,) = exposure_warnings(host, 8080, has_auth=False)
    assert f"{host}:8080" in message
    assert "WITHOUT A LOGIN" in message
    assert "--auth USER:PASSWORD" in message and "GRPO_AUTH" in message and "--auth-file" in message


def test_non_loopback_with_login_warns_about_plain_http():
    (message,) = exposure_warnings("0.0.0.0", 7860, has_auth=True)
    assert "with a login over plain HTTP" in message and "HTTPS" in message


def test_redact_url_hides_the_database_password():
    assert redact_url("postgresql+psycopg://grpo:s3cret@db:5432/grpo") == "postgresql+psycopg://grpo:***@db:5432/grpo"
    assert redact_url("sqlite:////data/grpo.db") == "sqlite:////data/grpo.db"
    assert redact_url("not a url") == "not a url"


def test_serve_with_malformed_credentials_exits_2_before_serving(clean_env, tmp_path, capsys):
    assert cli_main(["serve", "--data-dir", str(tmp_path), "--auth", "nopassword"]) == 2
    assert "grpo-dashboard serve: --auth / GRPO_AUTH: expected USER:PASSWORD" in capsys.readouterr().err
    assert cli_main(["serve", "--data-dir", str(tmp_path), "--max-upload-mb", "0"]) == 2
    assert "at least 1 MB" in capsys.readouterr().err


def test_serve_help_says_the_auth_file_holds_hashes_written_by_auth_add():
    from app.cli.main import build_parser

    serve = next(a for a in build_parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith("serve"))
    text = " ".join(serve.format_help().split())
    assert "user:password a line" not in text
    assert "scrypt hash" in text and "grpo-dashboard auth add" in text
