"""`python -m robustvlm.cli ...` (as accelerate launch and torchrun start it)."""

import sys

from robustvlm.cli import main

sys.exit(main())
