"""The Ray head the Ray executor tests submit to: ``GRPO_TEST_RAY_ADDRESS`` (its job submission address, which
``.ci/run`` sets after ``ray start --head``). Without it a module that needs it is skipped, or fails to collect when
``GRPO_RAY_REQUIRED=1`` (CI), so a missing head never passes for a skipped test."""

from __future__ import annotations

import os

import pytest


def ray_address_or_skip() -> str:
    """The head's address; skips the calling test module when there is none (raises under ``GRPO_RAY_REQUIRED=1``).

    Raises:
        RuntimeError: ``GRPO_RAY_REQUIRED=1`` and no address is set.
    """
    address = os.environ.get("GRPO_TEST_RAY_ADDRESS", "")
    if not address:
        if os.environ.get("GRPO_RAY_REQUIRED") == "1":
            raise RuntimeError("GRPO_RAY_REQUIRED=1 but GRPO_TEST_RAY_ADDRESS is not set (start a head: "
                               "ray start --head --num-cpus 2)")
        pytest.skip("GRPO_TEST_RAY_ADDRESS is not set (a Ray head's job submission address; .ci/run starts one)",
                    allow_module_level=True)
    return address
