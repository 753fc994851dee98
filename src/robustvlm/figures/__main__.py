"""`python -m robustvlm.figures`: the figure writer's command line (`figures.write`)."""

import sys

from robustvlm.figures.write import main

raise SystemExit(main(sys.argv[1:]))
