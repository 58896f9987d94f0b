"""Shared helpers for the thin CLIs in scripts/."""

import logging
import os
import sys


def setup_logging(name: str) -> logging.Logger:
    """Log to stdout in fairseq's format."""
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=os.environ.get("LOGLEVEL", "INFO").upper(),
        stream=sys.stdout,
        force=True,
    )
    return logging.getLogger(name)


def fail(msg: str, code: int = 2) -> "NoReturn":  # noqa: F821
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)
