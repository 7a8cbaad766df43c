"""A gloo worker thread that drops a finished collective's tensors while Python finalizes aborts the process (SIGABRT)
after training succeeded; once training has ended, the recorder's exit handler lets those threads finish and destroys
the group while the interpreter is whole. (The race itself: the two-process tests of test_integrations_accelerate.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.integration.scripts.runner import REPO

SCRIPT = textwrap.dedent("""
    import atexit, sys
    import torch.distributed as dist
    from grpo_core.engine.recorder import release_process_group_at_exit

    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    # registered before the release, so it runs after it (atexit is last in, first out)
    atexit.register(lambda: print("alive at exit:", dist.is_initialized(), flush=True))
    mode = sys.argv[2]
    if mode in ("release", "release-then-destroy"):
        release_process_group_at_exit()
        release_process_group_at_exit()  # a second train() in the same script: registered once
    if mode == "release-then-destroy":  # the script cleans up itself: the release at exit is a no-op
        dist.destroy_process_group()
    print("script done", flush=True)
""")


def _run(tmp_path, mode: str) -> str:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "rendezvous"), mode], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "script done" in result.stdout, result.stdout
    return result.stdout + result.stderr


def test_the_released_group_is_destroyed_at_exit(tmp_path):
    output = _run(tmp_path, "release")
    assert "alive at exit: False" in output
    assert "could not be destroyed" not in output


def test_without_the_release_the_group_outlives_the_script(tmp_path):  # what the release changes
    assert "alive at exit: True" in _run(tmp_path, "none")


def test_a_group_the_script_destroyed_itself_is_left_alone(tmp_path):
    output = _run(tmp_path, "release-then-destroy")
    assert "alive at exit: False" in output
    assert "could not be destroyed" not in output
