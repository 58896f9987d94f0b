"""Synonym tables as the criterions use them: found (a relative path is also looked up in the
data directory), checked against the task's dictionary, refused where the objective needs pairs
and the table holds none, and recorded in every checkpoint, so that a resumed run is given the
table it was trained with (``compat/resume.py`` keeps the record and asks for the check)."""

import logging
import os
from typing import Optional, Tuple

from truneg_fairseq.checkpoints import CheckpointError
from truneg_fairseq.core.lookup import SynonymLookup
from truneg_fairseq.lexicon import SynonymTable, SynonymTableError

logger = logging.getLogger(__name__)


def resolve_table_path(path: str, task) -> str:
    if os.path.isabs(path) or os.path.exists(path):
        return path
    data = getattr(getattr(task, "cfg", None), "data", None)
    if data:
        cand = os.path.join(str(data).split(os.pathsep)[0], path)
        if os.path.exists(cand):
            return cand
    return path


def table_record(table: Optional[SynonymTable], path: Optional[str]) -> Optional[dict]:
    """What a checkpoint records of the run's table: its file, its content fingerprint
    (:meth:`~truneg_fairseq.lexicon.SynonymTable.content_fingerprint`) and its size; None for a
    run without a table."""
    if table is None:
        return None
    return {
        "path": os.path.abspath(str(path)),
        "fingerprint": table.content_fingerprint(),
        "pairs": len(table),
    }


def load_synonym_lookup(
    path: str, task, needs_pairs: Optional[str] = None
) -> Tuple[SynonymLookup, dict]:
    """Load a table, check it belongs to the task's dictionary, and wrap it for the device;
    returns (lookup, :func:`table_record`). A table of 0 pairs is refused where ``needs_pairs``
    (the flag that needs them) says the objective would otherwise run as plain masked LM, and
    warned about elsewhere (the synonym statistics stay 0)."""
    path = resolve_table_path(path, task)
    symbols = task.source_dictionary.symbols
    table = SynonymTable.load(path, len(symbols))
    table.check_dictionary(symbols, path)
    if not len(table):
        why = (
            f"synonym table {path} holds 0 pairs (built with source "
            f"{table.meta.get('source')!r}, {table.meta.get('num_candidates')} candidate entries)"
        )
        if needs_pairs:
            raise SynonymTableError(
                f"{why}: {needs_pairs} would train as plain masked LM. Rebuild it with "
                "scripts/build_synonym_table.py (check --tokenizer and its files: the dictionary "
                "must hold whole words), or use --criterion masked_lm"
            )
        logger.warning(f"{why}: no prediction can count as a synonym; every synonym statistic is 0")
    logger.info(
        f"synonym table {path}: {len(table)} pairs, source {table.meta.get('source')}, "
        f"coverage {table.meta.get('coverage')}, {len(table.continuation_ids)} continuation pieces, "
        + (
            f"{len(table.content_ids)} content words"
            if table.content_ids is not None
            else "no content-word list (a table built before it existed: content_pred is not reported; rebuild it "
            "with scripts/build_synonym_table.py)"
        )
    )
    return SynonymLookup(table, len(symbols)), table_record(table, path)


def _said(record: Optional[dict]) -> str:
    if record is None:
        return "no synonym table"
    return (
        f"the synonym table {record.get('path')} ({record.get('pairs')} pairs, content "
        f"fingerprint {str(record.get('fingerprint'))[:12]})"
    )


def check_resumed_table(
    recorded, current: Optional[dict], checkpoint: str, resumed: bool, reset: bool
) -> None:
    """Refuse to resume ``checkpoint`` (trained with the table ``recorded``) with another table
    (``current``), unless ``reset`` (``--synonym-reset-table``). A checkpoint restored with
    ``--reset-optimizer`` (``resumed`` False) starts a new run from its weights and is not
    checked; one saved before tables were recorded (``recorded`` absent: not a dict) cannot be."""
    if not isinstance(recorded, dict) or "synonym_table" not in recorded:
        if resumed and current is not None:
            logger.info(
                f"{checkpoint} records no synonym table: the table it was trained with is not checked"
            )
        return
    before = recorded["synonym_table"]
    same = (before or {}).get("fingerprint") == (current or {}).get("fingerprint")
    if same or not resumed:
        return
    if reset:
        logger.warning(
            f"--synonym-reset-table: {checkpoint} was trained with {_said(before)}; the run goes on "
            f"with {_said(current)}"
        )
        return
    raise CheckpointError(
        f"{checkpoint} was trained with {_said(before)}, and this run gives {_said(current)}: "
        "resume with the table it was trained with, or add --synonym-reset-table to go on with "
        "this one"
    )
