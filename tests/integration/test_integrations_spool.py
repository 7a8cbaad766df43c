"""The spool and its sender: records numbered in order, kept on disk across a crash (a half-written line dropped),
sent in batches of bounded size, and applied by the dashboard exactly once whatever the network loses (requests
that fail before reaching it, answers lost after it applied them), in process against the real ingest handlers."""

from __future__ import annotations

import random

import pytest

from app.api.ingest import IngestApi
from grpo_core.integrations.sender import DashboardError, RemoteStore, SpoolSender
from grpo_core.integrations.spool import RECORDS_FILE, Spool, SpoolError
from grpo_core.runs.script_runs import run_config_from_trainer
from storage import CompletionRecord, GroupRecord, RunStatus

CONFIG = run_config_from_trainer({"num_generations": 2, "per_device_train_batch_size": 2}, model="tiny",
                                 reward_names=["acc"], reward_weights=[1.0], max_steps=30)


def _spool(tmp_path) -> Spool:
    return Spool.create(tmp_path / "spool", url="http://x", client_key="key-0001",
                        create={"name": "r", "config": CONFIG, "max_steps": 30})


def test_records_are_numbered_kept_and_acknowledged_in_order(tmp_path):
    spool = _spool(tmp_path)
    assert [spool.append({"kind": "step", "n": i}) for i in range(5)] == [1, 2, 3, 4, 5]
    assert [r["seq"] for r in spool.pending(max_records=3, max_bytes=1 << 20)] == [1, 2, 3]
    spool.ack(2)
    assert [r["seq"] for r in spool.pending(max_records=10, max_bytes=1 << 20)] == [3, 4, 5]
    assert [r["seq"] for r in spool.pending(max_records=10, max_bytes=1)] == [3]  # the first always goes
    # a crash in the middle of a line: reopened, the cut line is dropped and the numbering goes on
    with open(spool.folder / RECORDS_FILE, "a") as handle:
        handle.write('{"kind": "step", "seq": 6, "n"')
    again = Spool.open(spool.folder)
    assert (again.last_seq, again.acked) == (5, 2)
    assert again.append({"kind": "step"}) == 6
    assert [r["seq"] for r in again.pending(max_records=10, max_bytes=1 << 20)] == [3, 4, 5, 6]
    again.ack(1)  # a dashboard that lost records: they are sent again
    assert again.pending(max_records=1, max_bytes=1 << 20)[0]["seq"] == 2
    with pytest.raises(SpoolError, match="holds a spool already"):
        _spool(tmp_path)
    with pytest.raises(SpoolError, match="not a spool folder"):
        Spool.open(tmp_path)


class FlakyClient:
    """The dashboard's handlers behind a network that fails: a request lost before it arrives, or its answer lost
    after the dashboard applied it."""

    def __init__(self, api: IngestApi, token, rng: random.Random) -> None:
        self.api, self.token, self.rng = api, token, rng

    def _call(self, handler, *args):
        if self.rng.random() < 0.3:
            raise DashboardError(0, "connection refused")
        answer = handler(self.token, *args)
        if self.rng.random() < 0.3:
            raise DashboardError(0, "connection reset (the answer was lost)")
        return answer

    def create_run(self, create, client_key):
        answer = self._call(self.api.create, {**create, "client_key": client_key})
        return answer["run_id"], answer["last_seq"]

    def send_records(self, run_id, records):
        records = [r for r in records][: self.rng.randint(1, len(records))]  # a batch cut short by the sender
        return self._call(self.api.batches, run_id, {"records": records})

    def progress(self, run_id, step, phase):
        return self._call(self.api.progress, run_id, {"step": step, "phase": phase})["cancel_requested"]


def test_every_step_is_applied_once_through_a_network_that_loses_requests_and_answers(store, tmp_path):
    token = store.authenticate_api_token(store.create_api_token("alice", "cluster")[1])
    spool = _spool(tmp_path)
    sender = SpoolSender(spool, FlakyClient(IngestApi(store), token, random.Random(7)))
    remote = RemoteStore(spool, sender)
    steps = 25
    for step in range(1, steps + 1):
        completions = [CompletionRecord(index=i, text=f"s{step}c{i}", rewards={"acc": float(i)}, total_reward=float(i),
                                        advantage=1.0 - 2 * i) for i in range(2)]
        remote.record_step(0, step, metrics={"reward": step / 10}, wall_time=float(step),
                           groups=[("train", [GroupRecord(step=step, row_index=-1, prompt="p", completions=completions)])])
        if step % 5 == 0:
            try:
                sender.send_once()  # the sender's rounds happen while training goes on
            except DashboardError:
                pass
    remote.finish_run(0, RunStatus.COMPLETED)
    for _ in range(200):
        try:
            if sender.send_once():
                break
        except DashboardError:
            continue
    assert spool.finished
    [run] = store.list_runs()
    assert run.status == RunStatus.COMPLETED and run.owner == "alice"
    assert [p.step for p in store.metrics_since(run.id)] == list(range(1, steps + 1))
    assert store.group_steps(run.id) == list(range(1, steps + 1))
    assert all(len(store.groups_at(run.id, s)) == 1 for s in range(1, steps + 1))
    assert store.ingest_cursor(run.id).last_seq == spool.last_seq == steps + 1
