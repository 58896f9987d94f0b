"""The work directory of the demo and the study: which of its entries the pipeline owns.

The pipeline writes a fixed set of entries there (:data:`ENTRIES`: the corpus, the data-bin,
checkpoints, logs, results) and a marker (:data:`WORK_MARKER`) saying the directory is its work
directory. ``--force`` removes those entries only; whatever else the user keeps there stays.
A directory without the marker that already holds one of those names (a ``corpus.txt`` of the
user's, a ``data-bin`` of another run) is refused before anything is read or written: the
pipeline would otherwise take that file as its own input, or remove it."""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import List

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.outputs import atomic_open

WORK_MARKER = ".truneg-work.json"
# everything the pipeline writes at the top of its work directory
ENTRIES = (
    "corpus.txt",
    "raw",
    "tok",
    "data-bin",
    ".truneg-output.json",
    ".truneg-stages.json",
    ".data-bin.lock",
    "logs",
    "checkpoints",
    "first_look",
    "results",
    "tb",
)


def _present(work: str) -> List[str]:
    return [n for n in ENTRIES if os.path.lexists(os.path.join(work, n))]


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def claim_workdir(work: str, command: str, flag: str, force: bool, log: logging.Logger) -> None:
    """Make ``work`` the pipeline's work directory for ``command``; with ``force``, remove what
    an earlier run of the pipeline wrote there (:data:`ENTRIES`), nothing else.
    :class:`OutputDirError` names ``flag`` when ``work`` holds one of those names without the
    marker (the user's own files, or another program's)."""
    marker = os.path.join(work, WORK_MARKER)
    if os.path.exists(work) and not os.path.isdir(work):
        raise OutputDirError(f"{flag} {work}: not a directory; choose a directory")
    owned = os.path.isfile(marker)
    if os.path.isdir(work) and not owned:
        foreign = _present(work)
        if foreign:
            raise OutputDirError(
                f"{flag} {work}: {', '.join(foreign)} already there, not written by {command} "
                f"(no {WORK_MARKER}); {command} would read or replace them: move them away, or "
                f"choose a new or empty {flag}"
            )
    if force and owned:
        removed = _present(work)
        for name in removed:
            _remove(os.path.join(work, name))
        if removed:
            log.info(
                f"--force: removed {', '.join(removed)} from {work} (the pipeline's own entries; "
                "other files there are kept)"
            )
    os.makedirs(work, exist_ok=True)
    if not owned:
        with atomic_open(marker, "w", encoding="utf-8") as f:
            json.dump({"command": command, "entries": list(ENTRIES)}, f, indent=1)
            f.write("\n")
