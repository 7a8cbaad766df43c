"""A user's own GRPO script on a vision-language model (tests/integration/scripts/trl_vlm_script.py: the tiny LLaVA,
an ``image`` column of ``datasets.Image`` features) records each group's picture with ``DashboardCallback`` over HTTP
with alice's API token, through its spool and the real ingest routes (served by uvicorn in process): the picture
beside each group is that group's row's, and only alice (and an admin) read it; the same script recording straight
into a store URL keeps the same pictures."""

from __future__ import annotations

import io
import threading
import time
from contextlib import contextmanager

import pytest
import uvicorn
from fastapi import FastAPI
from PIL import Image

from app.api.ingest import ingest_routes
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.integrations.spool import Spool
from grpo_core.runs.images import group_images
from storage import RunStatus
from storage.run_images import GROUP_IMAGES_KEY
from tests.integration.scripts.runner import VLM_SCRIPT, run_script
from tests.servers import free_port

#: The script's rows: the colour of each row's picture by its answer.
COLOURS = {"red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255), "yellow": (250, 200, 0)}


@contextmanager
def ingest_server(store):
    """The dashboard's ingest routes on ``store``, served over HTTP on a free port until the block ends."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(FastAPI(routes=ingest_routes(store)), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the ingest routes were not served"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def _check_pictures(store, run, owner: str | None) -> None:
    """Each group's picture is its row's (its colour is the group's answer), read by the owner and an admin; with an
    owner, another plain login is refused."""
    groups = store.groups_at(run.id, 1)
    assert len(groups) == 2
    for group in groups:
        [name] = group.extra[GROUP_IMAGES_KEY]
        [image] = group_images(store, run, group.row_index, actor=Actor(owner))
        assert image.name == name and image.data_url().startswith("data:image/png;base64,")
        with Image.open(io.BytesIO(image.data), formats=["PNG"]) as picture:
            assert picture.size == (28, 28)
            assert picture.convert("RGB").getpixel((14, 14)) == COLOURS[group.extra["answer"]]
        assert group_images(store, run, group.row_index, actor=Actor("root", is_admin=True)) == [image]
        if owner is not None:
            with pytest.raises(NotOwnerError, match="bob may not see the images of run"):
                group_images(store, run, group.row_index, actor=Actor("bob"))


def test_a_vlm_script_records_each_groups_picture_over_http_for_its_owner_only(store, tiny_vlm_dir, tmp_path):
    token = store.create_api_token("alice", "cluster")[1]
    with ingest_server(store) as url:
        run_script(tiny_vlm_dir, tmp_path / "out", tmp_path / "log.txt", target=url, token=token, steps=1,
                   script=VLM_SCRIPT)
    [spool_dir] = (tmp_path / "out" / "dashboard-spool").iterdir()
    assert Spool.open(spool_dir).finished  # every record went through the spool and was acknowledged
    [run] = store.list_runs()
    assert run.status == RunStatus.COMPLETED and run.owner == "alice", (run.status, run.error)
    _check_pictures(store, run, "alice")


def test_a_vlm_script_records_each_groups_picture_into_a_store_url(store, settings, tiny_vlm_dir, tmp_path):
    run_script(tiny_vlm_dir, tmp_path / "out", tmp_path / "log.txt", target=settings.db_url, steps=1,
               script=VLM_SCRIPT)
    [run] = store.list_runs()
    assert run.status == RunStatus.COMPLETED and run.owner is None, (run.status, run.error)
    _check_pictures(store, run, None)  # a run written straight into the store has no owner, as every script run
