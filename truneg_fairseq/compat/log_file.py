"""One ``--log-file`` handler per file (``one_log_file_handler``).

fairseq 0.12's ``progress_bar.progress_bar`` adds a new ``logging.FileHandler`` for
``log_file`` to its module's logger on every call, and fairseq-train calls it once per epoch
for training and once per validation: epoch N's lines reach the file N times (a 10-epoch GLUE
run wrote 55 "valid on" lines). The mend passes ``log_file`` on only while that logger has no
handler for the file yet, so each line is written once; the file, its format and every other
handler stay as fairseq makes them.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import functools
import logging
import os

from .wrapping import wrap_once


def _has_file_handler(logger: logging.Logger, path: str) -> bool:
    target = os.path.abspath(path)
    return any(
        isinstance(h, logging.FileHandler) and os.path.abspath(h.baseFilename) == target
        for h in logger.handlers
    )


def one_log_file_handler() -> None:
    """Wrap ``fairseq.logging.progress_bar.progress_bar`` (fairseq_cli looks it up on the module
    at each call) so that a log file gets its handler once."""
    from fairseq.logging import progress_bar as module

    def one_handler(original):
        @functools.wraps(original)
        def progress_bar(*args, **kwargs):
            log_file = kwargs.get("log_file")
            if log_file is not None and _has_file_handler(module.logger, log_file):
                kwargs["log_file"] = None
            return original(*args, **kwargs)

        return progress_bar

    wrap_once(module, "progress_bar", one_handler, marker="_one_log_file_handler")
