"""Reward presets have owners (real server, ``shared_dashboard``, through the workbench's own handlers): a login's
preset is not listed to, loaded, overwritten or deleted by another login; only an admin publishes a shared preset,
which every login loads and none but an admin deletes (grpo_core/rescore/composition.py)."""

from __future__ import annotations

ALICE_RULES = "- rule: format_regex\n  weight: 0.25\n  params:\n    pattern: ALICE-SECRET-PATTERN\n"
BOB_RULES = "- rule: length\n  weight: 1.0\n"
TEAM_RULES = "- rule: format_regex\n  weight: 1.0\n  params:\n    pattern: TEAM-PATTERN\n"


def _save(d, user: str, name: str, rules: str, shared: bool = False) -> str:
    message, _ = d.ui(user, "workbench-save-preset", {"workbench-rules": rules, "workbench-preset-name": name,
                                                      "workbench-preset-shared": shared})
    return message


def _load(d, user: str, name: str) -> str:
    (rules,) = d.ui(user, "workbench-load-preset", {"workbench-preset": name})
    return str(rules)


def _choices(d, user: str) -> list[str]:
    (update,) = d.ui(user, "workbench-preset", event="focus")
    return [c[0] if isinstance(c, list) else c for c in update["choices"]]


def _delete(d, user: str, name: str) -> str:
    message, _ = d.ui(user, "workbench-delete-preset", {"workbench-preset": name})
    return message


def test_a_logins_preset_is_its_own(shared_dashboard):
    d = shared_dashboard
    assert _save(d, "alice", "alice-only", ALICE_RULES) == "Saved preset alice-only."
    assert "ALICE-SECRET-PATTERN" in _load(d, "alice", "alice-only")
    assert "alice-only" in _choices(d, "alice")
    assert "alice-only" not in _choices(d, "bob")
    assert "ALICE-SECRET-PATTERN" not in _load(d, "bob", "alice-only")  # not found for bob
    assert _delete(d, "bob", "alice-only").startswith("Not deleted")
    assert _save(d, "bob", "alice-only", BOB_RULES) == "Saved preset alice-only."  # bob's own, of the same name
    assert "ALICE-SECRET-PATTERN" in _load(d, "alice", "alice-only")  # alice's is untouched
    assert "ALICE-SECRET-PATTERN" not in _load(d, "bob", "alice-only")
    config = d.http("bob").get("/config").text
    assert "alice-only" not in config and "ALICE-SECRET-PATTERN" not in config
    assert _delete(d, "alice", "alice-only") == "Deleted preset alice-only."
    assert "alice-only" not in _choices(d, "alice") and "alice-only" in _choices(d, "bob")


def test_only_an_admin_publishes_or_deletes_a_shared_preset(shared_dashboard):
    d = shared_dashboard
    assert _save(d, "bob", "team", BOB_RULES, shared=True).startswith("Not saved: only an admin")
    assert _save(d, "admin", "team", TEAM_RULES, shared=True) == "Saved shared preset team."
    for user in ("alice", "bob"):
        assert "shared/team" in _choices(d, user)
        assert "TEAM-PATTERN" in _load(d, user, "shared/team")
        assert _delete(d, user, "shared/team").startswith("Not deleted")
        assert _save(d, user, "shared/team", BOB_RULES).startswith("Not saved")  # no name with a folder
    assert "TEAM-PATTERN" in _load(d, "alice", "shared/team")
    assert _delete(d, "admin", "shared/team") == "Deleted preset shared/team."
    assert "shared/team" not in _choices(d, "bob")
