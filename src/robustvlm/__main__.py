"""`python -m robustvlm ...`: the same as the `robustvlm` command."""

import sys

from robustvlm.cli import main

sys.exit(main())
