"""``python -m app`` is ``grpo-dashboard``."""

import sys

from app.cli.main import main

sys.exit(main())
