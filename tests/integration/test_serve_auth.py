"""``grpo-dashboard serve --auth u:p`` for real: a process on a free port whose app, API and uploads answer only
after Gradio's login, and which refuses uploads over ``--max-upload-mb``; plus the warning printed when serving a
non-loopback address without a login.

Gradio 6 (``gradio/routes.py``) serves ``/`` to everyone, but without a login the page's embedded config is only
``{"auth_required": true, ...}`` with no components; ``/config``, ``/gradio_api/info``, ``/gradio_api/upload`` and
the queue depend on ``login_check`` and answer 401. ``POST /login`` sets the session cookie.
"""

from __future__ import annotations

import httpx
import pytest

from tests.servers import serving


@pytest.fixture
def served(tmp_path):
    """``(base_url, log_path)`` of ``python -m app serve --auth u:p --max-upload-mb 1`` on a free port."""
    with serving(tmp_path / "data", "--auth", "u:p", "--max-upload-mb", "1", log_path=tmp_path / "serve.log") as app:
        yield app.url.rstrip("/"), app.log_path


def test_served_app_requires_the_login(served, tmp_path):
    base, log_path = served
    anonymous = httpx.Client(base_url=base, timeout=30)

    page = anonymous.get("/")
    assert page.status_code == 200
    assert '"auth_required":true' in page.text.replace(" ", "")  # Gradio's login form, not the app
    assert "dataset-file" not in page.text and "tab-datasets" not in page.text
    for path in ("/config", "/gradio_api/info", "/gradio_api/login_check"):
        response = anonymous.get(path)
        assert response.status_code == 401, path
        assert "tab-datasets" not in response.text
    upload = anonymous.post("/gradio_api/upload", files={"files": ("p.jsonl", b'{"prompt": "hi"}\n')})
    assert upload.status_code == 401

    assert anonymous.post("/login", data={"username": "u", "password": "wrong"}).status_code == 400
    user = httpx.Client(base_url=base, timeout=30)
    assert user.post("/login", data={"username": "u", "password": "p"}).json() == {"success": True}
    config = user.get("/config")
    assert config.status_code == 200
    assert "tab-datasets" in config.text

    # Gradio itself refuses an upload over --max-upload-mb (the importer checks again; tests/unit/access/test_access.py).
    small = user.post("/gradio_api/upload", files={"files": ("p.jsonl", b'{"prompt": "hi"}\n')})
    assert small.status_code == 200, small.text
    big = user.post("/gradio_api/upload", files={"files": ("big.jsonl", b"x" * (1024 * 1024 + 4096))})
    assert big.status_code == 413, big.text

    log = log_path.read_text()
    assert "WITHOUT A LOGIN" not in log  # loopback address: no warning
    assert ":p@" not in log and "u:p" not in log


def test_serving_a_public_address_without_login_prints_a_warning(tmp_path, monkeypatch, capsys):
    """The warning goes to standard error before anything starts (the app itself is not built here)."""
    from app import server
    from grpo_core.settings import load_settings

    def stop(_settings):
        raise RuntimeError("stop before serving")

    monkeypatch.setattr(server, "create_context", stop)
    settings = load_settings(data_dir=tmp_path, host="0.0.0.0", port=8123)
    with pytest.raises(RuntimeError, match="stop before serving"):
        server.serve(settings)
    err = capsys.readouterr().err
    assert "WARNING: the dashboard listens on 0.0.0.0:8123" in err and "WITHOUT A LOGIN" in err

    with pytest.raises(RuntimeError):
        server.serve(settings.with_overrides(auth=(("u", "p"),)))
    err = capsys.readouterr().err
    assert "WITHOUT A LOGIN" not in err and "login over plain HTTP" in err
