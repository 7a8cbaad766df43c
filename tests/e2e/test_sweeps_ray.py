"""The browser sweep of ``tests/e2e/test_sweeps.py`` with the dashboard's runs trained as Ray jobs: served with
``--executor ray --ray-address $GRPO_TEST_RAY_ADDRESS --max-concurrent-runs 2``, the same 4-point sweep of the tiny
local model (one step each) is launched from the Launch tab; its 4 runs complete, each through its own Ray job
(``ray_submission_id``, the job ``SUCCEEDED``), never more than two at once (the other two wait in the queue, not on
the cluster), and the Runs tab's Sweeps view shows 4 completed rows.

The form and table steps are the local test's helpers. Needs a Ray head on this machine (the store is a SQLite file
and the run folders are under the test's data folder), as ``tests/integration/test_ray_executor.py`` does: skipped
without ``GRPO_TEST_RAY_ADDRESS`` unless ``GRPO_RAY_REQUIRED=1``.
"""

from __future__ import annotations

import time

import pytest

from storage import Store, sqlite_url
from tests.helpers import expect_the_sweep_table_completed, fill_the_launch_form, launch_the_sweep
from tests.ray_head import ray_address_or_skip
from tests.servers import serving

ADDRESS = ray_address_or_skip()


pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The dashboard on its own data folder, training two runs at once as jobs on the Ray head at ``ADDRESS``."""
    data_dir = tmp_path_factory.mktemp("e2e-sweeps-ray")
    with serving(data_dir, "--executor", "ray", "--ray-address", ADDRESS, "--max-concurrent-runs", "2") as served:
        yield {"url": served.url, "data_dir": data_dir}


def _most_at_once(runs) -> int:
    """The most of ``runs`` training at the same moment, from their ``started_at``/``finished_at``."""
    return max(sum(other.started_at <= run.started_at < other.finished_at for other in runs) for run in runs)


def test_a_four_point_sweep_through_the_ray_executor(page, server, tiny_model_dir):
    from ray.job_submission import JobSubmissionClient

    fill_the_launch_form(page, tiny_model_dir, "ray-sweep")
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        sweep = launch_the_sweep(page, store)
        runs = expect_the_sweep_table_completed(page, store, sweep)
    finally:
        store.close()

    submission_ids = [run.ray_submission_id for run in runs]
    assert all(submission_ids), submission_ids  # each run trained by its own Ray job
    assert all(run.ray_submission_id.startswith(f"grpo-run-{run.id:05d}-") for run in runs), submission_ids
    assert _most_at_once(runs) == 2  # two trained at once; the other two were queued until a slot freed

    client = JobSubmissionClient(ADDRESS)
    deadline = time.monotonic() + 60  # a worker's job ends a moment after it records its run completed
    while not all(client.get_job_status(s).is_terminal() for s in submission_ids):
        assert time.monotonic() < deadline, "the runs' Ray jobs did not end within 60 s"
        time.sleep(0.5)
    assert [str(client.get_job_status(s).value) for s in submission_ids] == ["SUCCEEDED"] * 4
    info = client.get_job_info(submission_ids[0])
    assert "grpo_core.training.worker" in info.entrypoint
