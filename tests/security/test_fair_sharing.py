"""One login cannot take every slot of the costly jobs (real server, ``shared_dashboard``: an admin and two logins).

Login A (alice) tries to stall the dashboard: a rescoring whose ``format_regex`` backtracks for ever on every
recorded completion, sent twice at once through the named API; a preflight sent twice at once through the page.
Each time A's second request is refused at once (one job a login), B's (bob's) request of the same kind starts
within a second instead of queueing behind A's, the dashboard answers other requests within a second, and A's
rescoring ends in bounded time with the pattern scored as no match (grpo_core/child_jobs/slots.py, the per-group regex
budget of grpo_core/rescore/worker.py). A's launches whose tool plugin takes seconds to import hold at most two plugin
checks; B's is checked meanwhile."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid

import httpx
import pytest

from grpo_core.runs.script_runs import run_config_from_trainer

EVIL = "^(a|aa)+$"  # backtracks about 1.6^n steps on "a" * n + "!" (the regex module stops it after its timeout)
EVIL_TEXT = "a" * 40 + "!"
CONFIG = run_config_from_trainer({"num_generations": 4, "per_device_train_batch_size": 4, "beta": 0.0},
                                 model="HuggingFaceTB/SmolLM2-135M-Instruct", reward_names=["acc"], reward_weights=[1.0], max_steps=5)


def _group(index: int) -> dict:
    completions = [{"index": i, "text": EVIL_TEXT, "rewards": {"acc": 0.0}, "total_reward": 0.0, "advantage": 0.0,
                    "num_tokens": 41, "token_stats": None} for i in range(4)]
    return {"row_index": -1, "prompt": f"say a {index}", "extra": {}, "completions": completions}


@pytest.fixture(scope="module")
def stall_run(shared_dashboard) -> int:
    """A run of alice's, recorded through the ingest API: 6 steps of one group of 4 completions ``EVIL_TEXT``."""
    d = shared_dashboard
    shown, _ = d.ui("alice", "token-create", {"token-name": "stall"})
    token = re.search(r'<pre id="token-value">(grpo_[^<]+)</pre>', shown).group(1)
    headers = {"Authorization": f"Bearer {token}"}
    created = httpx.post(f"{d.url}api/v1/runs", headers=headers, timeout=30, json={
        "client_key": uuid.uuid4().hex, "name": "stall", "config": CONFIG, "max_steps": 6})
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    records = [{"seq": step, "kind": "step", "step": step, "wall_time": 1.0, "metrics": {"reward": 0.0},
                "groups": [{"split": "train", "groups": [_group(step)]}]} for step in range(1, 7)]
    answer = httpx.post(f"{d.url}api/v1/runs/{run_id}/batches", headers=headers, json={"records": records},
                        timeout=30)
    assert answer.status_code == 200 and answer.json()["last_seq"] == 6, answer.text
    return run_id


class Event:
    """One call of the page's own handler (as :meth:`SharedDashboard.ui` makes it), followed on a thread: when it
    was sent, when Gradio started it, how it ended."""

    def __init__(self, dashboard, user: str, elem_id: str, values: dict) -> None:
        self.sent = time.monotonic()
        self.started: float | None = None
        self.ended: float | None = None
        self.success: bool | None = None
        self.output: object = None
        self._thread = threading.Thread(target=self._run, args=(dashboard, user, elem_id, values))
        self._thread.start()

    def _run(self, dashboard, user, elem_id, values) -> None:
        session = dashboard.http(user)
        config = session.get("/config").json()
        by_id = {c["id"]: c for c in config["components"]}
        target = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)
        dependency = next(d for d in config["dependencies"] if [target, "click"] in d["targets"])
        data = []
        for input_id in dependency["inputs"]:
            props = by_id[input_id].get("props", {})
            data.append(values.get(props.get("elem_id"), props.get("value")))
        session_hash = uuid.uuid4().hex[:11]
        self.sent = time.monotonic()
        joined = session.post("/gradio_api/queue/join", json={
            "data": data, "fn_index": dependency["id"], "session_hash": session_hash, "trigger_id": target,
            "event_data": None})
        assert joined.status_code == 200, joined.text
        with session.stream("GET", "/gradio_api/queue/data", params={"session_hash": session_hash},
                            timeout=600) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_starts" and self.started is None:
                    self.started = time.monotonic()
                if message.get("msg") == "process_completed":
                    self.ended = time.monotonic()
                    self.success = bool(message.get("success"))
                    self.output = message.get("output")
                    return

    @property
    def queue_delay(self) -> float:
        """Seconds between the server receiving the request and starting it."""
        return (self.started or float("inf")) - (getattr(self, "queued", None) or self.sent)

    def wait(self, timeout_s: float = 600) -> Event:
        self._thread.join(timeout_s)
        return self

    @property
    def start_delay(self) -> float:
        return (self.started or float("inf")) - self.sent


class ApiCall(Event):
    """One call of the named API ``rescore_run`` through ``gradio_client``, timed as :class:`Event`."""

    def __init__(self, dashboard, user: str, run_id: int, pattern: str) -> None:  # noqa: D107
        self.sent = time.monotonic()
        self.started = self.ended = self.success = self.output = self.queued = None
        rules = json.dumps([{"rule": "format_regex", "weight": 1.0, "params": {"pattern": pattern}}])
        self._job = dashboard.client(user).submit(run_id, rules, api_name="/rescore_run")
        self._thread = threading.Thread(target=self._follow)
        self._thread.start()

    def _follow(self) -> None:
        self.codes = []
        while not self._job.done():
            code = self._job.status().code.name
            self.codes.append((round(time.monotonic() - self.sent, 2), code))
            if self.queued is None and code in ("IN_QUEUE", "PROCESSING", "ITERATING"):
                self.queued = time.monotonic()  # the server has the request (the client's own start is not its)
            if self.started is None and code in ("PROCESSING", "ITERATING"):
                self.started = time.monotonic()
            time.sleep(0.05)
        self.ended = time.monotonic()
        self.started = self.started or self.ended
        self.queued = self.queued or self.started
        try:
            self.output, self.success = self._job.result(), True
        except Exception as exc:  # noqa: BLE001 - the refusal is what some calls test
            self.output, self.success = str(exc), False


def _rescore(d, user: str, run_id: int, pattern: str) -> ApiCall:
    return ApiCall(d, user, run_id, pattern)


def _pings(d, seconds: float) -> float:
    """The slowest of /config answers asked every 0.1 s for ``seconds``."""
    slowest, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        httpx.get(d.url + "config", timeout=60)
        slowest = max(slowest, time.monotonic() - start)
        time.sleep(0.1)
    return slowest


def test_a_backtracking_rescoring_holds_neither_every_slot_nor_the_server(shared_dashboard, stall_run):
    d = shared_dashboard
    first = _rescore(d, "alice", stall_run, EVIL)
    deadline = time.monotonic() + 60
    while first.started is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # alice's rescoring child is scoring the backtracking pattern now
    second = _rescore(d, "alice", stall_run, EVIL)
    other = _rescore(d, "bob", stall_run, "a")
    slowest = _pings(d, 2.0)
    listed = time.monotonic()
    d.client("bob").predict(api_name="/list_runs")
    listed = time.monotonic() - listed
    other.wait(120)
    second.wait(30)
    assert listed < 1.0, f"bob's list_runs took {listed:.1f} s during alice's rescoring"
    # started within a second of reaching the server, never queued behind alice's rescoring (10 s or more)
    assert other.queue_delay < 1.0, f"bob's rescoring waited {other.queue_delay:.1f} s behind alice's {other.codes[:40]}"
    assert other.success, other.output
    assert first.ended is None or other.ended < first.ended
    assert second.success is False and "one login may run at once" in str(second.output)
    assert second.ended - second.sent < 5
    assert slowest < 1.0
    first.wait(120)
    assert first.success, first.output
    assert first.ended - first.sent < 90  # 6 groups, each at most ~2 s of regex (the regex module overshoots)
    result = first.output
    assert all(step["reward_after"] == 0.0 for step in result["steps"]), result["steps"]


def test_a_login_holds_one_model_job_and_another_login_is_served(shared_dashboard):
    d = shared_dashboard
    form = {"launch-model": str(d.model_dir), "preflight-prompts": 1}
    d.client("bob")  # logged in before the clock starts
    first = Event(d, "alice", "preflight-button", form)
    deadline = time.monotonic() + 60
    while first.started is None and time.monotonic() < deadline:
        time.sleep(0.1)
    second = Event(d, "alice", "preflight-button", form).wait(60)  # refused at once: alice holds her one slot
    assert second.success is False and "one login may run at once" in str(second.output), second.output
    assert second.ended < (first.ended or float("inf")), "alice's second preflight ran beside her first"
    other = Event(d, "bob", "preflight-button", form)
    slowest = _pings(d, 1.5)
    listed = time.monotonic()
    d.client("bob").predict(api_name="/list_runs")
    listed = time.monotonic() - listed
    assert listed < 1.0
    assert other.wait(600).start_delay < 1.0, f"bob's preflight waited {other.start_delay:.1f} s for alice's"
    assert first.ended is None or other.started < first.ended, "bob's preflight started after alice's ended"
    assert slowest < 1.0
    assert first.wait(600).success and other.success


def test_two_long_completions_diff_within_a_bound(shared_dashboard, stall_run):
    """Inspect's diff of two completions 20,000 characters long (a script's, over the ingest API) answers within
    seconds. Before the fix ``difflib`` ran in the web process: quadratic to cubic, two different 4,000-character
    texts took about 20 s of its interpreter, these ones minutes."""
    import random

    from tests.security.page import Page

    d, words = shared_dashboard, random.Random(7)
    shown, _ = d.ui("alice", "token-create", {"token-name": "diff"})
    headers = {"Authorization": "Bearer " + re.search(r'<pre id="token-value">(grpo_[^<]+)</pre>', shown).group(1)}
    run_id = httpx.post(f"{d.url}api/v1/runs", headers=headers, timeout=30, json={
        "client_key": uuid.uuid4().hex, "name": "diff", "config": CONFIG}).json()["run_id"]
    texts = [" ".join("".join(words.choice("ab") for _ in range(5)) for _ in range(3400)) for _ in range(2)]
    group = {"row_index": 0, "prompt": "p", "completions": [
        {"index": i, "text": text, "rewards": {"acc": 0.0}, "total_reward": float(i), "advantage": 0.0}
        for i, text in enumerate(texts)]}
    record = {"seq": 1, "kind": "step", "step": 1, "wall_time": 1.0, "metrics": {"reward": 0.0},
              "groups": [{"split": "train", "groups": [group]}]}
    assert httpx.post(f"{d.url}api/v1/runs/{run_id}/batches", headers=headers, json={"records": [record]},
                      timeout=30).status_code == 200
    page = Page(d, "bob")
    page.call("inspect-run", {"inspect-run": run_id}, event="input", output="inspect-step")  # fills the steps
    shown = page.call("inspect-step", {"inspect-run": run_id, "inspect-step": 1}, event="change",
                      output="inspect-diff-a")
    choices = shown["data"][0]["choices"]
    refs = [value for _, value in choices]
    started = time.monotonic()
    answer = page.call("inspect-diff-a", {"inspect-run": run_id, "inspect-diff-a": refs[0], "inspect-diff-b": refs[1]},
                       event="change")
    assert time.monotonic() - started < 20, "the diff took too long"
    assert isinstance(answer, dict) and 'id="completion-diff"' in str(answer["data"][0]), answer


SLOW_TOOLS = '''
import time

time.sleep(6)  # the launch's check imports this in a child: a plugin that takes its time


def weather(city):  # no docstring, no type hint: TRL cannot build its JSON schema, so no run is ever queued
    return "sunny"
'''


def test_a_login_holds_two_plugin_checks_and_another_login_is_served(shared_dashboard, alice_dataset):
    """alice sends three ``launch_run`` calls naming a tool plugin that takes 6 s to import: two checks run in
    children, the third is refused at once (grpo_core/child_jobs/slots.py's ``PLUGIN_CHECK_SLOTS``: 2 a login) and
    starts no child; bob's launch naming the same plugin is checked meanwhile (refused for the plugin, not the pool)."""
    d = shared_dashboard
    (d.plugin_dir / "slow_tools.py").write_text(SLOW_TOOLS, encoding="utf-8")
    config = json.dumps({"name": "slow tools", "dataset_id": alice_dataset, "max_steps": 2,
                         "tool_plugins": ["slow_tools:weather"]})
    alice, bob = d.client("alice"), d.client("bob")
    first = [alice.submit(config, api_name="/launch_run") for _ in range(2)]
    deadline = time.monotonic() + 60
    while (any(job.status().code.name not in ("PROCESSING", "ITERATING") for job in first)
           and time.monotonic() < deadline):
        time.sleep(0.1)
    time.sleep(1.0)  # both children are importing the plugin now
    sent = time.monotonic()
    with pytest.raises(Exception, match="alice has 2 plugin checks running, the most one login may run at once"):
        alice.predict(config, api_name="/launch_run")
    assert time.monotonic() - sent < 3, "alice's third check was not refused at once"
    with pytest.raises(Exception, match="TRL cannot build its JSON schema") as checked:
        bob.predict(config, api_name="/launch_run")  # bob's child ran beside alice's two
    assert "plugin checks running" not in str(checked.value)
    for job in first:
        with pytest.raises(Exception, match="TRL cannot build its JSON schema"):
            job.result()
    assert [run for run in alice.predict(api_name="/list_runs") if run["name"] == "slow tools"] == []
