"""Run folders: how every command claims its output folder, and the JSONL rows it appends there.

A run folder holds `config.resolved.yaml`, every setting of the run with defaults filled in
(as `robustvlm.redact` lets them be written), under a first line naming the command that wrote
it (`# robustvlm eval run`). `claim_run_folder` refuses an output folder that cannot hold a run
(`check_output_folder`: the file-system root, the home folder, a file, a folder that cannot be
created, a non-empty folder holding no robustvlm run, which would mix the user's files with the
run's and could replace them; a symbolic link, dangling or not; the current folder) and gives
`--resume` one meaning in every command. A folder is robustvlm's only when its marker says so: a
run's `config.resolved.yaml` or `run.lock`, or `.robustvlm`, which a command that keeps no settings
(a demo, `data synth`, `data fetch --to`) writes before any other file (`mark_output_folder`);
never because it holds a file named like one a command writes. An output file (`convert --out`,
`mc build --out`) is written beside its name and renamed into place (`write_output_file`), and
recorded in its folder's `.robustvlm-files`, so a re-run may replace it but never a user's file.

`--resume`:

- without resume, a folder that already holds a run (its `config.resolved.yaml`) is refused,
  so finished work is never overwritten by accident;
- with resume, the stored settings must equal the new ones (keys allowed to differ, such as a
  batch size that changes no result, are named by the command); the error names every key that
  differs; a folder holding another command's run is refused naming that command.
  Paths compare resolved: `runs/x` and `/abs/runs/x` are one setting when they name one file;
- a folder whose run finished no work (nothing in it but its settings, its lock, empty files and
  the inputs a run prepares from its settings, `data/` and `base/`) is free again: a run that
  failed validation or setup never blocks the corrected command, with or without `--resume`.

Whoever writes a run folder holds an exclusive OS lock on its `run.lock` (`fcntl.flock`, taken
before the settings are written and held until `release_run_folders()` or the process ends, so a
killed writer frees it). A second writer stops at once with a ConfigError naming the process that
holds it. Only the main process of a distributed run writes (and locks); the others only check.
Every command that writes a run folder claims it here: train / embed train / rm train (the
training loop), eval, mc eval, icl eval, diagnose, embed eval, rm eval / score / sample / bon,
rm matrix, robustness fit / task-signal, study and sweep (their top folders and each run's).

Per-row outputs (predictions, per-question scores, training logs) are JSONL files written one
row at a time as work finishes. `read_jsonl` reads them back to resume: a torn last line (a
killed run: no newline, not valid JSON) is dropped and the file rewritten without it, while any
other unreadable line is damage and raises a DataError naming the file and line. Files a user
gives as input (candidates, scores, predictions) are read with `read_input_jsonl`, which never
writes: a torn line there is an error.

One module per part: `folders` (which folders and files a command may write), `settings` (the
stored settings and their comparison), `claim` (the lock and `claim_run_folder`), `jsonl` (per-row
outputs) and `usage` (a served model's counts); every public name is re-exported here.
"""

from robustvlm.runs.claim import (
    atomic_folder,
    claim_run_folder,
    lock_run_folder,
    release_run_folders,
)
from robustvlm.runs.folders import (
    CONFIG_FILE,
    LOCK_FILE,
    MARKER_FILE,
    MARKERS,
    NAME_MAX,
    OWNED_FILE,
    PATH_MAX,
    PREPARED,
    check_output_file,
    check_output_folder,
    check_output_path,
    holds_finished_work,
    is_robustvlm_folder,
    make_output_folder,
    mark_output_folder,
    owns_file,
    prepare_output_file,
    unmark_unused_folder,
    write_output_file,
)
from robustvlm.runs.jsonl import append_jsonl, read_input_jsonl, read_jsonl, write_jsonl
from robustvlm.runs.settings import (
    differing_keys,
    flatten_settings,
    resolved_settings,
    stored_command,
    write_settings,
)
from robustvlm.runs.usage import USAGE_FILE, usage_recorder

__all__ = [
    "CONFIG_FILE",
    "LOCK_FILE",
    "MARKERS",
    "MARKER_FILE",
    "NAME_MAX",
    "OWNED_FILE",
    "PATH_MAX",
    "PREPARED",
    "USAGE_FILE",
    "append_jsonl",
    "atomic_folder",
    "check_output_file",
    "check_output_folder",
    "check_output_path",
    "claim_run_folder",
    "differing_keys",
    "flatten_settings",
    "holds_finished_work",
    "is_robustvlm_folder",
    "lock_run_folder",
    "make_output_folder",
    "mark_output_folder",
    "owns_file",
    "prepare_output_file",
    "read_input_jsonl",
    "read_jsonl",
    "release_run_folders",
    "resolved_settings",
    "stored_command",
    "unmark_unused_folder",
    "usage_recorder",
    "write_jsonl",
    "write_output_file",
    "write_settings",
]
