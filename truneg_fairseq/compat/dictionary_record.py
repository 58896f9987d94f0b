"""The training dictionary a checkpoint records, and the dictionary it is loaded with checked
against it.

fairseq keeps no trace of the dictionary a model was trained with beyond its size: a ``dict.txt``
of the same size in another order (entries swapped, the data binarized with it) loads and scores
in silence, every row of the embedding read as another word. Every checkpoint ``fairseq-train``
saves with the plugin records its task's dictionary (``records["dictionary"]``, beside the other
records of :mod:`.resume`): its symbols in id order, their number and their fingerprint (sha256
of the symbols, one per line: the fingerprint a synonym table records of its dictionary). Where
a checkpoint is loaded with a data directory (evaluation, export, the hub, resuming
``fairseq-train``), that directory's dictionary must list the recorded symbols in the same order
(those the task adds at the end, ``<mask>``, excepted): a mismatch is one
:class:`~truneg_fairseq.errors.CheckpointError` naming the file and the first entry that differs. A
checkpoint without the record (saved before it existed, by fairseq alone, or an import) is
checked as before.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from truneg_fairseq.checkpoint_schema.load_errors import CheckpointError
from truneg_fairseq.fingerprints import dictionary_fingerprint

KEY = "dictionary"


fingerprint = dictionary_fingerprint  # the synonym tables' fingerprint of a dictionary


def dictionary_record(task) -> Optional[dict]:
    """What a checkpoint records of ``task``'s dictionary (None for a task without one)."""
    d = getattr(task, "source_dictionary", None)
    symbols = list(getattr(d, "symbols", None) or [])
    if not symbols:
        return None
    return {"fingerprint": fingerprint(symbols), "size": len(symbols), "symbols": symbols}


def recorded_dictionary(state, records_key: str) -> Optional[dict]:
    """The dictionary record of a checkpoint's saved ``state`` (None when it has none), among
    the records kept under ``extra_state[records_key]`` (:data:`.resume.RECORDS`)."""
    extra = state.get("extra_state") if isinstance(state, dict) else None
    records = extra.get(records_key) if isinstance(extra, dict) else None
    record = records.get(KEY) if isinstance(records, dict) else None
    if not isinstance(record, dict) or not isinstance(record.get("symbols"), (list, tuple)):
        return None
    return record


def first_difference(recorded: Sequence[str], symbols: Sequence[str]) -> Optional[int]:
    """The first id at which ``symbols`` (a dictionary as loaded) differs from ``recorded``, or
    None when ``symbols`` is ``recorded`` or its start (the task's own symbols after it)."""
    if list(recorded[: len(symbols)]) == list(symbols):
        return None
    return next(
        (i for i, (a, b) in enumerate(zip(recorded, symbols)) if a != b),
        min(len(recorded), len(symbols)),
    )


def difference(recorded: Sequence[str], symbols: Sequence[str], nspecial: int, where: str):
    """Words for how ``symbols`` differs from ``recorded`` (None when it does not): the first
    entry that differs, by its line of ``where`` (a dict.txt), and how many differ."""
    i = first_difference(recorded, symbols)
    if i is None:
        return None
    differ = sum(a != b for a, b in zip(recorded, symbols)) + max(0, len(symbols) - len(recorded))
    at = f"line {i - nspecial + 1} of {where}" if i >= nspecial else f"entry {i} of {where}"
    here = repr(symbols[i]) if i < len(symbols) else "nothing"
    there = repr(recorded[i]) if i < len(recorded) else "nothing (it has fewer entries)"
    return f"{at} is {here} where the checkpoint's dictionary has {there}; {differ} entries differ"


def check_dictionary_file(checkpoint, record: dict, path, flag_text: str, fix: str) -> None:
    """``path`` (a dict.txt) against the dictionary ``checkpoint`` records (``record``): one
    :class:`CheckpointError` when they differ (``flag_text`` names the file as the user gave it,
    ``fix`` says what to do). A file fairseq cannot read as a dictionary is left to the loader's
    own error."""
    from fairseq.data import Dictionary

    try:
        d = Dictionary.load(str(path))
    except Exception:
        return
    said = difference(record["symbols"], d.symbols, d.nspecial, os.path.basename(str(path)))
    if said is None:
        return
    raise CheckpointError(
        f"{flag_text} is not the dictionary {checkpoint} was trained with (the one it records, "
        f"fingerprint {str(record.get('fingerprint'))[:12]}): {said}, so every word would be read "
        f"as another. {fix}"
    )
