"""``python -m capeval.cli``."""

import sys

from capeval.cli import main

sys.exit(main())
