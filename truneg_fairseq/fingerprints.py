"""The fingerprint of a dictionary: sha256 of its symbols in id order, one per line. What a
synonym table records of the dictionary it was built for, and what a checkpoint records of the
dictionary it was trained with, so that either can be checked against a ``dict.txt``. Standard
library only."""

import hashlib
from typing import Sequence


def dictionary_fingerprint(symbols: Sequence[str]) -> str:
    """sha256 (hex) of ``symbols`` in id order, one per line."""
    h = hashlib.sha256()
    for s in symbols:
        h.update(s.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
