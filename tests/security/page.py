"""The page as one browser tab of a login, for the security tests: one Gradio session whose load and timer handlers
have run (they fill the run and dataset lists, which Gradio checks a chosen value against), then any handler of the
page run by element and event, as the browser runs it (``/gradio_api/queue/join``, the answer read from
``/gradio_api/queue/data``)."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.security.conftest import SharedDashboard


class Page:
    """The page as one browser tab of ``user``: one session, its load and timer handlers run first (they fill the
    run and dataset lists, which Gradio checks a chosen value against)."""

    def __init__(self, dash: SharedDashboard, user: str) -> None:
        self.session = dash.http(user)
        self.config = self.session.get("/config").json()
        self.by_id = {c["id"]: c for c in self.config["components"]}
        self.session_hash = uuid.uuid4().hex[:11]
        self.loaded = [self.run(dependency, [self.default(i) for i in dependency["inputs"]])
                       for dependency in self.config["dependencies"]
                       if any(event in ("load", "tick") for _, event in dependency["targets"])]

    def default(self, component_id: int):
        return self.by_id[component_id].get("props", {}).get("value")

    def elem_id(self, component_id: int) -> str:
        return str(self.by_id.get(component_id, {}).get("props", {}).get("elem_id") or "")

    def call(self, elem_id: str, values: dict, event: str = "click", output: str | None = None):
        """The output message of the ``event`` handler of ``elem_id`` (the one writing the element ``output``, when
        given), its inputs the page's defaults but ``values`` (``{elem_id: value}``)."""
        ids = {self.elem_id(c): c for c in self.by_id}
        dependency = next(d for d in self.config["dependencies"] if [ids[elem_id], event] in d["targets"]
                          and (output is None or ids[output] in d["outputs"]))
        return self.run(dependency, [values.get(self.elem_id(i), self.default(i)) for i in dependency["inputs"]])

    def run(self, dependency: dict, data: list):
        """The handler's ``output`` message (``{"data": [...]}`` or ``{"error": ...}``), or the failure's text."""
        trigger = dependency["targets"][0][0] if dependency["targets"] else None
        joined = self.session.post("/gradio_api/queue/join", json={
            "data": data, "fn_index": dependency["id"], "session_hash": self.session_hash, "trigger_id": trigger,
            "event_data": None})
        if joined.status_code != 200:
            return joined.text
        try:
            with self.session.stream("GET", "/gradio_api/queue/data", params={"session_hash": self.session_hash},
                                     timeout=60) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if message.get("msg") == "process_completed":
                            return message.get("output")
        except httpx.HTTPError as exc:
            return str(exc)
        return None
