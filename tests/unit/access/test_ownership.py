"""Who may change a run with several logins: the auth file's ``[admin]`` lines, the owner recorded on runs and
datasets (also in a store of the previous version), the refusals of cancel, resume, delete and notes in
grpo_core.runs.actions (each action authorising itself), and the same refusals in the Runs tab's handlers of the built dashboard (a ``gr.Request`` carrying the login)."""

from __future__ import annotations

import warnings

import gradio as gr
import pytest

from app.server import build_blocks, create_context
from grpo_core.access.logins import AccessError, read_auth_admins, read_auth_file
from grpo_core.access.ownership import SINGLE_USER, Actor, NotOwnerError, may_change
from grpo_core.runs.actions import annotate_run, authorize_run_action, cancel_run, delete_run, resume_run
from grpo_core.settings import load_admins
from storage import RunStatus, StoreError
from tests.helpers import old_store

AUTH_FILE = "# the team\nalice:a-secret\n[admin] carol:c: with colon \nbob:b\n"


def _cancelled_run(store, owner):
    run = store.create_run(name=f"{owner}-run", config={}, dataset_id=None, max_steps=2, owner=owner)
    store.request_cancel(run.id)  # a queued run is cancelled at once: a finished run, deletable
    return store.get_run(run.id)


def test_admin_lines_of_the_auth_file(tmp_path, monkeypatch):
    path = tmp_path / "users.txt"
    path.write_text(AUTH_FILE, encoding="utf-8")
    assert read_auth_file(path) == [("alice", "a-secret"), ("carol", "c: with colon "), ("bob", "b")]
    assert read_auth_admins(path) == frozenset({"carol"})
    monkeypatch.setenv("GRPO_AUTH_FILE", str(path))
    assert load_admins() == frozenset({"carol"})
    monkeypatch.delenv("GRPO_AUTH_FILE")
    assert load_admins() == frozenset()
    # "[admin]" glued to the name is not the mark: a user name with a bracket, not an admin
    path.write_text("[admin]dave:d\n", encoding="utf-8")
    assert read_auth_file(path) == [("[admin]dave", "d")] and read_auth_admins(path) == frozenset()
    path.write_text("[admin] \n", encoding="utf-8")
    with pytest.raises(AccessError, match="line 1"):
        read_auth_admins(path)


@pytest.mark.parametrize(
    ("actor", "owner", "allowed"),
    [
        (SINGLE_USER, "alice", True),  # no login: single-user, as before
        (Actor("alice"), "alice", True),
        (Actor("bob"), "alice", False),
        (Actor("carol", is_admin=True), "alice", True),
        (Actor("bob"), None, True),  # created before logins were turned on
    ],
)
def test_who_may_change(actor, owner, allowed):
    assert may_change(actor, owner) is allowed


def test_actor_from_login():
    assert Actor.from_login("carol", frozenset({"carol"})) == Actor("carol", True)
    assert Actor.from_login("bob", frozenset({"carol"})) == Actor("bob", False)
    assert Actor.from_login(None, frozenset({"carol"})) == SINGLE_USER
    assert Actor.from_login("", frozenset({""})) == SINGLE_USER


def test_runs_and_datasets_record_their_owner(store):
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=2, owner="alice")
    assert store.get_run(run.id).owner == "alice"
    assert store.create_run(name="s", config={}, dataset_id=None, max_steps=2).owner is None
    dataset = store.add_dataset(name="d", source_name="d.jsonl", format="jsonl", num_rows=1, columns=["prompt"],
                                prompt_kind="text", path="/nowhere.jsonl", owner="bob")
    assert store.get_dataset(dataset.id).owner == "bob"


def test_a_store_of_the_previous_version_gains_the_owner_columns(tmp_path):
    from storage import Store

    store = Store(old_store(tmp_path / "old.db"))
    try:
        assert store.get_run(1).owner is None
        run = store.create_run(name="new", config={}, dataset_id=None, max_steps=1, owner="alice")
        assert store.get_run(run.id).owner == "alice"
    finally:
        store.close()


def test_only_the_owner_or_an_admin_deletes_or_resumes(store, settings):
    run = _cancelled_run(store, "alice")
    with pytest.raises(NotOwnerError, match="bob may not delete run #.* it belongs to alice"):
        delete_run(store, settings, run.id, Actor("bob"))
    with pytest.raises(NotOwnerError, match="bob may not resume"):
        resume_run(store, settings, run.id, Actor("bob"))
    with pytest.raises(NotOwnerError, match="may not cancel"):
        authorize_run_action(store, Actor("bob"), run.id, "cancel")
    assert store.get_run(run.id).status == RunStatus.CANCELLED  # nothing changed

    assert resume_run(store, settings, run.id, Actor("alice")).status == RunStatus.QUEUED
    store.request_cancel(run.id)
    delete_run(store, settings, run.id, Actor("carol", is_admin=True))
    with pytest.raises(StoreError):
        store.get_run(run.id)
    other = _cancelled_run(store, "bob")
    delete_run(store, settings, other.id)  # no login: single-user
    with pytest.raises(StoreError):
        store.get_run(other.id)


def test_annotate_authorises_itself(store):
    run = store.create_run(name="alice-run", config={}, dataset_id=None, max_steps=2, owner="alice")
    with pytest.raises(NotOwnerError, match="bob may not edit the notes of run #"):
        annotate_run(store, run.id, notes="bob was here", tags_text="mine", actor=Actor("bob"))
    kept = store.get_run(run.id)
    assert kept.notes == "" and kept.tags == []
    with pytest.raises(StoreError):
        annotate_run(store, 987654, notes="", tags_text="", actor=Actor("alice"))
    done = annotate_run(store, run.id, notes="a note", tags_text="b, a, b", actor=Actor("alice"))
    assert done.notes == "a note" and done.tags == ["b", "a"]
    assert annotate_run(store, run.id, notes="", tags_text=None, actor=Actor("carol", is_admin=True)).tags == []


def test_cancel_authorises_itself(store):
    run = store.create_run(name="alice-run", config={}, dataset_id=None, max_steps=2, owner="alice")
    asked: list[int] = []

    def launcher_cancel(run_id: int):
        asked.append(run_id)
        return store.request_cancel(run_id)

    with pytest.raises(NotOwnerError, match="bob may not cancel run #.* it belongs to alice"):
        cancel_run(store, run.id, Actor("bob"), request_stop=launcher_cancel)
    assert asked == [] and store.get_run(run.id).status == RunStatus.QUEUED  # nothing asked, nothing changed
    with pytest.raises(StoreError):
        cancel_run(store, 987654, Actor("alice"), request_stop=launcher_cancel)
    assert asked == []

    assert cancel_run(store, run.id, Actor("carol", is_admin=True), request_stop=launcher_cancel).status == (
        RunStatus.CANCELLED
    )
    assert asked == [run.id]
    mine = store.create_run(name="alice-run", config={}, dataset_id=None, max_steps=2, owner="alice")
    assert cancel_run(store, mine.id, Actor("alice")).status == RunStatus.CANCELLED  # default: the store's flag
    running = store.create_run(name="alice-run", config={}, dataset_id=None, max_steps=2, owner="alice")
    assert store.claim_run(running.id)
    assert cancel_run(store, running.id, Actor("alice")).cancel_requested is True
    unowned = store.create_run(name="run", config={}, dataset_id=None, max_steps=2)
    assert cancel_run(store, unowned.id).status == RunStatus.CANCELLED  # no login: single-user


def _handler(blocks, name):
    found = [f.fn for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == name]
    assert len(found) == 1, name
    return found[0]


def test_the_runs_tab_refuses_another_logins_run(settings):
    ctx = create_context(settings.with_overrides(admins=frozenset({"carol"})))
    try:
        blocks = build_blocks(ctx)
        run = _cancelled_run(ctx.store, "alice")
        confirm = _handler(blocks, "on_delete_confirm")
        ask = _handler(blocks, "on_delete_ask")
        save = _handler(blocks, "on_save_notes")
        resume = _handler(blocks, "on_resume")
        cancel = _handler(blocks, "on_cancel")
        bob = gr.Request(username="bob")

        with pytest.warns(UserWarning, match="Not deleted: bob may not delete run .* belongs to alice"):
            row, _, _ = ask(run.id, bob)
        assert row["visible"] is False
        with pytest.warns(UserWarning, match="Not deleted: bob may not delete"):
            confirm(run.id, "", "", bob)
        with pytest.warns(UserWarning, match="Not saved: bob may not edit the notes of run"):
            save(run.id, "mine", "bob was here", "", "", bob)
        with pytest.warns(UserWarning, match="bob may not resume"):
            resume(run.id, bob)
        queued = ctx.store.create_run(name="alice-queued", config={}, dataset_id=None, max_steps=2, owner="alice")
        with pytest.warns(UserWarning, match="Not cancelled: bob may not cancel run .* belongs to alice"):
            cancel(queued.id, bob)
        assert ctx.store.get_run(queued.id).status == RunStatus.QUEUED
        kept = ctx.store.get_run(run.id)
        assert kept.notes == "" and kept.tags == [] and kept.status == RunStatus.CANCELLED

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no refusal for the owner
            save(run.id, "mine", "alice's note", "", "", gr.Request(username="alice"))
            cancel(queued.id, gr.Request(username="alice"))
            assert ctx.store.get_run(queued.id).status == RunStatus.CANCELLED
            assert ctx.store.get_run(run.id).notes == "alice's note"
            confirm(run.id, "", "", gr.Request(username="carol"))  # an admin
        with pytest.raises(StoreError):
            ctx.store.get_run(run.id)
    finally:
        ctx.store.close()
