"""Run robustvlm commands one after another in every process of a torchrun launch (the
data-parallel scoring tests): argv is a JSON file holding a list of command lines; exits with the
first non-zero status."""

from __future__ import annotations

import json
import sys

from robustvlm.cli import main

if __name__ == "__main__":
    for command in json.loads(open(sys.argv[1], encoding="utf-8").read()):
        status = main(command)
        if status:
            sys.exit(status)
