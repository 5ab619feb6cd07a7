"""``python -m mkpolicy``."""

import sys

from mkpolicy.cli.main import main

sys.exit(main())
