"""``python -m grpo_core.worker RUN_ID``: the same as ``python -m grpo_core.worker.train RUN_ID`` (kept for scripts
written for earlier versions; the launcher starts :mod:`grpo_core.worker.train`)."""

import sys

from grpo_core.worker.train import main

if __name__ == "__main__":
    sys.exit(main())
