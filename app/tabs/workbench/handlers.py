"""The workbench's handlers: plain functions of the form keyed by field name (no Gradio layout here). Each returns
what a user should read; bad input is a message, never an exception."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from app.context import AppContext, actor_of, boundary_of, check_webhooks
from grpo_core.bounded_parse import dump_yaml
from grpo_core.child_jobs.slots import SlotsBusy
from grpo_core.rescore.composition import delete_preset, launch_config, list_presets, load_preset, save_preset
from grpo_core.rescore.job import start_rescoring
from grpo_core.rescore.request import RescoreError, parse_request, parse_rules_text
from grpo_core.run_config import ConfigError
from grpo_core.submit.queue import submit_run
from storage import StoreError
from storage.records import RescoringInfo

POLL_S = 0.5
"""How often a running rescoring's progress is read back."""


def _whole(value: Any, field: str) -> int | None:
    """A form field as a whole number; ``None`` when empty. Raises RescoreError naming ``field``."""
    text = str(value if value is not None else "").strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not number.is_integer():
        raise RescoreError(f"{field} must be a whole number, got {text[:40]!r}")
    return int(number)


def rules_for_run(ctx: AppContext, run_id: int | None) -> tuple[str, str]:
    """The run's composition as YAML and a line on what it recorded. Inputs: run. Outputs: rules, recorded."""
    if run_id is None:
        return "", ""
    try:
        run = ctx.store.get_run(int(run_id))
    except StoreError as exc:
        return "", str(exc)
    return dump_yaml(list((run.config or {}).get("rewards") or [])), recorded_line(ctx, run.id)


def recorded_line(ctx: AppContext, run_id: Any) -> str:
    """What the run has recorded, read now (a live run records groups after it was chosen): ``Recorded groups at N
    steps (first–last).``, ``This run has no recorded groups yet.``, or ``""`` for no run. Inputs: run."""
    if run_id is None:
        return ""
    try:
        steps = ctx.store.group_steps(int(run_id))
    except (StoreError, TypeError, ValueError) as exc:
        return str(exc)
    return (f"Recorded groups at {len(steps)} steps ({steps[0]}–{steps[-1]})." if steps
            else "This run has no recorded groups yet.")


def request_from_form(form: Mapping[str, Any]) -> dict[str, Any]:
    """The rescoring request the form describes (plain values; :func:`grpo_core.rescore.request.parse_request`
    checks them). Raises RescoreError: no run, or rules that are not a composition."""
    if form.get("run") is None:
        raise RescoreError("choose a run")
    scale = form.get("scale_rewards")
    return {"run_id": int(form["run"]), "rewards": parse_rules_text(form.get("rules") or ""),
            "first_step": _whole(form.get("first_step"), "first step"),
            "last_step": _whole(form.get("last_step"), "last step"),
            "sample": _whole(form.get("sample"), "sample") or None,
            "scale_rewards": None if scale in (None, "", "run's") else scale}


def start(ctx: AppContext, form: Mapping[str, Any], request: Any = None) -> RescoringInfo:
    """Start the rescoring the form asks for, as the login ``request`` serves. Raises RescoreError."""
    return start_rescoring(ctx.store, parse_request(request_from_form(form)),
                           workdir=ctx.settings.data_dir / "rescorings", boundary=boundary_of(ctx, request),
                           owner=actor_of(ctx, request).user)


def follow(ctx: AppContext, rescoring_id: int, *, timeout_s: float = 7200.0) -> Iterator[RescoringInfo]:
    """The rescoring as it runs, every :data:`POLL_S` seconds, until it ends (the last one is final)."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = ctx.store.get_rescoring(rescoring_id)
        yield info
        if info.status != "running" or time.monotonic() > deadline:
            return
        time.sleep(POLL_S)


def cancel(ctx: AppContext, rescoring_id: int | None, request: Any = None) -> str:
    """Ask the running rescoring to stop. Inputs: the shown rescoring. Outputs: a line. Only the login that started
    it (or an admin) may."""
    if rescoring_id is None:
        return "No rescoring is running."
    info = ctx.store.get_rescoring(int(rescoring_id))
    actor = actor_of(ctx, request)
    if info.owner is not None and info.owner != actor.user and not actor.is_admin:
        return f"Rescoring #{info.id} was started by {info.owner}; only they or an admin may cancel it."
    ctx.store.request_rescoring_cancel(info.id)
    return f"Cancelling rescoring #{info.id}…"


def launch(ctx: AppContext, form: Mapping[str, Any], request: Any = None) -> str:
    """Queue the run again with the form's composition (through the Launch tab's path: boundary, validation).
    Inputs: run, rules, launch_name. Outputs: a line naming the new run, or why not."""
    try:
        if form.get("run") is None:
            raise RescoreError("choose a run")
        run = ctx.store.get_run(int(form["run"]))
        boundary = boundary_of(ctx, request)
        config = launch_config(run.config or {}, parse_rules_text(form.get("rules") or ""),
                               name=(form.get("launch_name") or "").strip() or None)
        check_webhooks(ctx, request, [config.webhook_url])
        submitted = submit_run(ctx.store, config, model_cache_dir=ctx.settings.model_cache_dir,
                               owner=actor_of(ctx, request).user, boundary=boundary)
    except (ConfigError, ValueError, StoreError, SlotsBusy) as exc:  # SlotsBusy: the login's plugin checks
        return f"Not launched: {exc}"
    ctx.launcher.tick()
    warnings = "".join(f"\n- {w}" for w in submitted.warnings)
    return f"Launched run #{submitted.run.id} {submitted.run.name} with these rules.{warnings}"


def preset_choices(ctx: AppContext, request: Any = None) -> list[str]:
    """The presets the login may load: its own, then the shared ones (``shared/<name>``)."""
    return list_presets(ctx.settings.data_dir, actor_of(ctx, request).user)


def save(ctx: AppContext, form: Mapping[str, Any], request: Any = None) -> tuple[str, list[str]]:
    """Save the form's composition as the login's preset, or (``preset_shared``, admins only) a shared one.
    Inputs: rules, preset_name, preset_shared. Outputs: a line, the preset choices."""
    actor = actor_of(ctx, request)
    shared = bool(form.get("preset_shared"))
    try:
        if shared and actor.user is not None and not actor.is_admin:
            raise RescoreError("only an admin may publish a shared preset; untick 'publish as shared'")
        path = save_preset(ctx.settings.data_dir, form.get("preset_name") or "",
                           parse_rules_text(form.get("rules") or ""), owner=actor.user, shared=shared)
    except ValueError as exc:
        return f"Not saved: {exc}", preset_choices(ctx, request)
    return f"Saved {'shared ' if shared else ''}preset {path.stem}.", preset_choices(ctx, request)


def load(ctx: AppContext, name: str | None, request: Any = None) -> str | None:
    """The preset's composition as YAML (``None``: keep the rules shown); the login's own or a shared one.
    Raises RescoreError."""
    if not name:
        return None
    return dump_yaml(load_preset(ctx.settings.data_dir, name, actor_of(ctx, request).user))


def delete(ctx: AppContext, name: str | None, request: Any = None) -> tuple[str, list[str]]:
    """Delete the login's preset ``name`` (a shared one: admins only). Outputs: a line, the preset choices."""
    actor = actor_of(ctx, request)
    if not name:
        return "Choose a preset to delete.", preset_choices(ctx, request)
    try:
        delete_preset(ctx.settings.data_dir, name, actor.user, is_admin=actor.is_admin)
    except RescoreError as exc:
        return f"Not deleted: {exc}", preset_choices(ctx, request)
    return f"Deleted preset {name}.", preset_choices(ctx, request)
