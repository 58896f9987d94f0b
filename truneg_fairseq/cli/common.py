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


def count_arg(text: str) -> int:
    """argparse type: an integer >= 0."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return n
