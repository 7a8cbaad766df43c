"""The auth file's hashed passwords (grpo_core/access/passwords.py, auth_file.py) and the per-login job slots
(grpo_core/child_jobs/slots.py), as pure functions on real files."""

from __future__ import annotations

import threading
import time

import pytest

from grpo_core.access.auth_file import LoginRegistry, add_login, migrate_auth_file, remove_login
from grpo_core.access.logins import AccessError
from grpo_core.access.passwords import hash_password, is_password_hash, verify_password
from grpo_core.child_jobs.slots import JobSlots, SlotsBusy


def test_a_hash_is_salted_and_verifies_only_its_password():
    first, second = hash_password("pw:with colon"), hash_password("pw:with colon")
    assert first != second and is_password_hash(first)
    assert verify_password("pw:with colon", first) and not verify_password("pw", first)
    assert not verify_password("pw:with colon", None) and not verify_password("", first)
    assert not verify_password(first, first)  # the hash itself is not a password


@pytest.mark.parametrize("stored", [
    "scrypt$1073741824$8$1$AAAAAAAAAAAAAAAAAAAAAA$" + "A" * 43,  # n = 2^30: a check would take minutes
    "scrypt$16384$64$1$AAAAAAAAAAAAAAAAAAAAAA$" + "A" * 43,
    "scrypt$16383$8$1$AAAAAAAAAAAAAAAAAAAAAA$" + "A" * 43,  # not a power of two
    "plain-password",
])
def test_a_hostile_or_plain_entry_is_no_hash_and_costs_one_ordinary_check(stored):
    assert not is_password_hash(stored)
    start = time.monotonic()
    assert not verify_password("anything", stored)
    assert time.monotonic() - start < 5


def test_plain_lines_are_migrated_keeping_comments_marks_and_order(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("# team\n[admin] carol:c pw\n\nalice:a:pw\n", encoding="utf-8")
    warnings = migrate_auth_file(path)
    assert [w.split(", ")[1].split(":")[0] for w in warnings] == ["line 2", "line 4"]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# team" and lines[2] == "" and lines[1].startswith("[admin] carol:scrypt$")
    assert "c pw" not in path.read_text() and "a:pw" not in path.read_text()
    assert path.stat().st_mode & 0o077 == 0
    registry = LoginRegistry(path=path)
    assert registry.verify("carol", "c pw") and registry.verify("alice", "a:pw")
    assert registry.admins() == {"carol"} and migrate_auth_file(path) == []


def test_add_and_remove_write_one_entry_and_the_registry_follows(tmp_path):
    path = tmp_path / "users.txt"
    assert add_login(path, "alice", "one") is True
    registry = LoginRegistry([("owner", "own-pw")], path)
    assert registry.verify("owner", "own-pw") and registry.verify("alice", "one")
    assert add_login(path, "alice", "two", admin=True) is False
    time.sleep(0.6)
    assert registry.verify("alice", "two") and not registry.verify("alice", "one")
    assert registry.admins() == {"alice"}
    removed: list[frozenset] = []
    registry.on_removed(removed.append)
    assert remove_login(path, "alice") and not remove_login(path, "alice")
    time.sleep(0.6)
    assert not registry.is_live("alice") and registry.is_live("owner") and removed == [frozenset({"alice"})]
    for bad in ("", "a b", "a:b", "[admin]", "#x"):
        with pytest.raises(AccessError):
            add_login(path, bad, "pw")


def test_a_login_holds_at_most_its_share_of_the_slots():
    slots = JobSlots("jobs", total=3, per_login=1)
    slots.acquire("alice")
    with pytest.raises(SlotsBusy, match="the most one login may run at once"):
        slots.acquire("alice")
    with slots.hold("bob"):
        slots.acquire("carol")
        with pytest.raises(SlotsBusy, match="3 jobs are running"):
            slots.acquire("dave")
        slots.release("carol")
    slots.release("alice")
    assert slots.running() == 0
    with pytest.raises(ValueError):
        JobSlots("jobs", total=2, per_login=2)  # one login could hold every slot
    held = []
    threads = [threading.Thread(target=lambda: held.append(_try(slots, "eve"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert held.count(True) == 1


def _try(slots: JobSlots, login: str) -> bool:
    try:
        slots.acquire(login)
    except SlotsBusy:
        return False
    return True
