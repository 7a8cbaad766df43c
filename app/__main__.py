"""``python -m app`` is ``grpo-dashboard``."""

import sys

from app.cli import main

sys.exit(main())
