"""The output directory of ``truneg-hf-train`` (and of :class:`TrueNegativeTrainer`): what it
may hold, which checkpoints the run wrote, and what each checkpoint was trained with.

* The run marker ``OUTPUT_DIR/.truneg-output.json`` (the marker of :mod:`truneg_fairseq.outputs`,
  command ``truneg-hf-train``) says the directory is a run's and lists the ``checkpoint-N``
  folders the run wrote, each ``saving`` (a save under way or cut short), ``complete`` or
  ``deleting``. The command writes only into a new or empty directory or its own earlier
  run (:func:`claim`); a directory that holds or is one of the run's inputs is refused.
* Only the checkpoints the marker lists are resumed from (:func:`last_checkpoint`: the last one
  complete, readable and recorded; earlier ones when the last was cut short, with a log line)
  and rotated by ``--save-total-limit`` (:func:`rotate`); any other folder of the directory,
  ``checkpoint-*`` or not, is never touched.
* Each checkpoint holds the run's settings (:mod:`truneg_fairseq.hf.run_record`); a resume with
  other settings is refused, naming the setting, both values and how to start afresh.
* A listed folder is deleted, replaced or resumed only when it carries the run's own record
  (:data:`RECORD` naming the command and the run id of the marker, written into the folder as
  soon as a save makes it): a listed name that is a link, or a folder without that record (a
  user's folder under a listed name), is refused before any work and never followed or deleted.

Everything here is the standard library and :mod:`truneg_fairseq.outputs`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.hf.run_record import AFRESH, OWNER, RECORD, check_resume
from truneg_fairseq.hf.text_inputs import input_paths
from truneg_fairseq.outputs import MARKER, atomic_open, check_dir, read_marker

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


# ---- the marker --------------------------------------------------------------------------------
def _marker(out: Path) -> Optional[dict]:
    path = out / MARKER
    if not path.exists() and not path.is_symlink():
        return None
    data = read_marker(path, str(out), "nothing was changed. Give a new --output-dir")
    if data["command"] != OWNER:
        return None
    found = data.get("checkpoints", {})
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and _CHECKPOINT.fullmatch(k) and isinstance(v, str)
        for k, v in found.items()
    ):
        raise OutputDirError(
            f"{out}: its {MARKER} lists no readable checkpoints; nothing was changed. Move that "
            "directory away, or give a new --output-dir"
        )
    return data


def checkpoints(out: os.PathLike) -> Dict[str, str]:
    """The checkpoint folders the run marker of ``out`` lists, with their state."""
    data = _marker(Path(out))
    return dict(data["checkpoints"]) if data else {}


def run_id(out: os.PathLike) -> Optional[str]:
    """The id the run marker of ``out`` gives its run (None: a marker written before runs had
    one, whose checkpoints are recognised by their record's command alone)."""
    data = _marker(Path(out))
    found = data.get("run") if data else None
    return found if isinstance(found, str) else None


def _write_marker(out: Path, found: Dict[str, str], run: Optional[str] = None) -> None:
    by_step = dict(sorted(found.items(), key=lambda kv: _step(kv[0])))
    data = {"command": OWNER, "files": {}, "checkpoints": by_step}
    run = run or run_id(out)
    data.update({"run": run} if run else {})
    with atomic_open(out / MARKER, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def mark(out: os.PathLike) -> None:
    """Make ``out`` a run directory (its marker, with a new run id, before anything else is
    written there)."""
    out = Path(out)
    if _marker(out) is None:
        out.mkdir(parents=True, exist_ok=True)
        _write_marker(out, {}, run=secrets.token_hex(8))


def note(out: os.PathLike, name: str, state: Optional[str]) -> None:
    """Record checkpoint ``name`` of ``out`` as ``state`` (None: no longer there)."""
    out = Path(out)
    if (out / MARKER).exists() and _marker(out) is None:
        raise OutputDirError(
            f"{out} holds the output of another command (its {MARKER}): checkpoints of this run "
            "go into a new output directory"
        )
    found = checkpoints(out)
    if state is None:
        found.pop(name, None)
    else:
        found[name] = state
    _write_marker(out, found)


def _step(name: str) -> int:
    return int(_CHECKPOINT.fullmatch(name).group(1))


# ---- whose folder a listed name is ---------------------------------------------------------------
def stamp(out: os.PathLike, name: str) -> None:
    """Make the folder of checkpoint ``name`` with the run's record in it (the command and the
    run id, the settings once the save is whole): from then on it is this run's."""
    from truneg_fairseq.hf.run_record import write_record

    (Path(out) / name).mkdir()
    write_record(Path(out) / name, None, run=run_id(out))


def not_ours(out: os.PathLike, name: str) -> str:
    """Why the listed ``name`` of ``out`` is not a folder this run wrote ('' when it is, or
    when nothing is there): a link (never followed), not a folder, or a folder without the
    run's record; an empty folder (a save killed before its record) counts as the run's."""
    path = Path(out) / name
    if path.is_symlink():
        return f"{path} is a symbolic link"
    if not path.exists():
        return ""
    if not path.is_dir():
        return f"{path} is not a folder"
    record = path / RECORD
    try:
        if record.is_symlink() or not record.is_file() or record.stat().st_size > 1 << 20:
            raise ValueError
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        if not any(path.iterdir()):
            return ""
        return f"{path} holds no readable {RECORD} of this run (files this run did not write)"
    run = run_id(out)
    if not isinstance(data, dict) or data.get("command") != OWNER:
        return f"{path}'s {RECORD} is not a record of {OWNER}"
    if run is not None and data.get("run") != run:
        return (
            f"{path}'s {RECORD} is another run's (run id {data.get('run')!r}, this run's {run!r})"
        )
    return ""


def refuse_unowned(out: os.PathLike) -> None:
    """Before any work: every folder the marker of ``out`` lists carries the run's record
    (:func:`not_ours`); else one :class:`OutputDirError` naming it, nothing changed."""
    out = Path(out)
    for name in sorted(checkpoints(out), key=_step) if out.is_dir() else ():
        why = not_ours(out, name)
        if why:
            raise OutputDirError(
                f"{why}, though {out / MARKER} lists it as a checkpoint of this run: it is never "
                "followed, resumed, replaced or deleted, and nothing was changed. Move it out of "
                f"{out}, or give a new --output-dir"
            )


# ---- before the run ----------------------------------------------------------------------------
def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def claim(out: os.PathLike, inputs: Dict[str, object], resume: bool = True) -> None:
    """Before any work: :class:`OutputDirError` when ``out`` cannot be this run's output
    directory: a file; a directory that is or holds one of ``inputs`` (``{flag: path or paths}``:
    this run writes and rotates checkpoints there); a directory that holds anything but an
    earlier run of this command; with ``resume`` False, an earlier run's directory that holds
    its checkpoints (a fresh run there would mix its checkpoints with the earlier run's)."""
    out = Path(os.path.abspath(out))
    if out.is_symlink() and not out.is_dir() or (out.exists() and not out.is_dir()):
        raise OutputDirError(
            f"--output-dir {out} is a file, not a directory: give a new (or empty) directory, or "
            "the directory of an earlier run to resume it"
        )
    real = os.path.realpath(out)
    named = [(flag, path) for flag, given in inputs.items() for path in input_paths(given)]
    for flag, path in named:
        if path and _inside(os.path.realpath(path), real):
            raise OutputDirError(
                f"--output-dir {out} holds the {flag} input {path}: this run writes and rotates "
                f"checkpoints there and would replace or delete it. Copy it out of {out}, or give "
                "another --output-dir"
            )
    if not out.is_dir():
        return
    try:  # another command's output, or files this command did not write
        check_dir(out, OWNER)
    except OutputDirError as e:
        raise OutputDirError(f"--output-dir {e}") from None
    written = sorted(checkpoints(out), key=_step)
    if not resume and written:
        raise OutputDirError(
            f"--no-resume: {out} holds the checkpoints of an earlier run ({', '.join(written)}); a "
            "fresh run writes into a new --output-dir (or leave --no-resume out to resume the "
            "earlier run)"
        )


def refuse_foreign_checkpoints(
    out: os.PathLike, start: int, max_steps: int, save_steps: int
) -> None:
    """A ``checkpoint-N`` folder the run would save into (N a multiple of ``save_steps`` after
    ``start``) that the run marker does not list: :class:`OutputDirError` before any work."""
    out = Path(out)
    if not out.is_dir():
        return
    ours = checkpoints(out)
    for name in sorted(os.listdir(out)):
        m = _CHECKPOINT.fullmatch(name)
        step = int(m.group(1)) if m else 0
        if m and name not in ours and start < step <= max_steps and step % save_steps == 0:
            raise OutputDirError(
                f"{out / name} was not written by this run, and the run would save its checkpoint "
                f"of update {step} there; move it away, or give a new --output-dir"
            )


# ---- a run's inputs and where it resumes (of an ``HFTrainConfig``) -------------------------
def run_inputs(cfg) -> dict:
    """The inputs of a run (an ``HFTrainConfig``), by flag."""
    return {
        "MODEL_DIR": cfg.model_dir,
        "--generator": cfg.generator,
        "--train": cfg.train,
        "--valid": cfg.valid,
        "--synonym-table": cfg.synonym_table,
    }


def resume_point(cfg, settings: dict) -> Optional[str]:
    """The checkpoint to resume (None: start from MODEL_DIR), checked against the settings; a
    checkpoint folder the run would save into that it did not write is refused now."""
    refuse_unowned(cfg.output_dir)
    last = last_checkpoint(cfg.output_dir) if cfg.resume else None
    start = 0
    if last:
        check_resume(last, settings)
        start = global_step(last)
    refuse_foreign_checkpoints(cfg.output_dir, start, cfg.max_steps, cfg.save_steps)
    return last


# ---- resuming ------------------------------------------------------------------------------------
MAX_STEP = 2**53  # more updates than any run makes: a larger global_step is not a count


def _unreadable_json(path: Path, key: str) -> str:
    """Why the JSON object file ``path`` (with ``key``) cannot be used ('' when it can)."""
    if not path.is_file():
        return f"no {path.name}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return f"its {path.name} is not complete JSON"
    if not isinstance(data, dict) or key not in data:
        return f"its {path.name} has no {key}"
    return ""


def _values(checkpoint: Path) -> Tuple[str, str]:
    """(why a whole checkpoint is passed over, what is forged in it), '' for none: its record
    holds no settings yet (a save under way) / ``global_step`` is not a whole number of updates
    or the settings are not an object (nothing transformers' Trainer or this run writes)."""
    step = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    step = step["global_step"]
    settings = json.loads((checkpoint / RECORD).read_text(encoding="utf-8"))["settings"]
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        return "", (
            f"{checkpoint / 'trainer_state.json'}: global_step is {json.dumps(step)[:40]}, not a "
            "whole number of updates"
        )
    if settings is None:
        return f"its {RECORD} records no settings", ""
    if not isinstance(settings, dict):
        return (
            "",
            f"{checkpoint / RECORD}: its settings are {type(settings).__name__}, not an object",
        )
    return "", ""


def global_step(checkpoint: os.PathLike) -> int:
    """The update count of a checkpoint :func:`last_checkpoint` returned (checked there)."""
    path = Path(checkpoint) / "trainer_state.json"
    return json.loads(path.read_text(encoding="utf-8"))["global_step"]


def last_checkpoint(out: os.PathLike) -> Optional[str]:
    """The last checkpoint the run marker of ``out`` lists as complete whose
    ``trainer_state.json`` and :data:`RECORD` are whole; a later one that is not (a save cut
    short, a kill while ``trainer_state.json`` was written) is passed over with a log line
    naming it, and the one before is resumed."""
    out = Path(out)
    found = checkpoints(out) if out.is_dir() else {}
    skipped = []
    for name in sorted(found, key=_step, reverse=True):
        path = out / name
        why = "cut short while it was written" if found[name] != "complete" else ""
        why = why or not_ours(out, name)
        why = why or _unreadable_json(path / "trainer_state.json", "global_step")
        why = why or _unreadable_json(path / RECORD, "settings")
        if not why:
            why, bad = _values(path)
            if bad:
                raise OutputDirError(
                    f"{bad}: transformers' Trainer does not write that, and nothing was changed. "
                    f"Move {path} away to resume from the checkpoint before it, or {AFRESH}"
                )
        if not why:
            if skipped:
                logger.warning(
                    f"{len(skipped)} incomplete checkpoint(s) left aside ({'; '.join(skipped)}): "
                    f"resuming from {path}, the previous complete one"
                )
            return str(path)
        if path.is_dir():
            skipped.append(f"{path}: {why}")
    if skipped:
        logger.warning(
            f"{len(skipped)} incomplete checkpoint(s) left aside ({'; '.join(skipped)}) and no "
            "complete one: starting from MODEL_DIR"
        )
    return None


def begin_checkpoint(out: os.PathLike, name: str) -> None:
    """Before checkpoint ``name`` is written into ``out``: a folder of that name the run wrote
    (a save cut short, or one after the checkpoint resumed from) is removed; one it did not
    write is :class:`OutputDirError`; then ``name`` is recorded as ``saving``."""
    out = Path(out)
    if os.path.lexists(out / name):
        why = "" if name in checkpoints(out) else f"{out / name} was not written by this run"
        why = why or not_ours(out, name)
        if why:
            raise OutputDirError(
                f"{why}, and the run would save a checkpoint there; nothing was deleted. Move it "
                "away, or give a new output directory"
            )
        remove(out, name)
    out.mkdir(parents=True, exist_ok=True)
    note(out, name, "saving")
    stamp(out, name)


# ---- rotation ------------------------------------------------------------------------------------
def remove(out: os.PathLike, name: str) -> None:
    """Delete checkpoint ``name`` of ``out`` that the run wrote (recorded ``deleting`` first, so
    a kill part way leaves it recorded and never resumed from)."""
    out = Path(out)
    why = not_ours(out, name)
    if why:  # a folder the run did not write: forgotten, never deleted or followed
        logger.warning(f"{why}: left in place, and no longer listed as this run's checkpoint")
        note(out, name, None)
        return
    note(out, name, "deleting")
    shutil.rmtree(out / name, ignore_errors=True)
    note(out, name, None)


def rotate(out: os.PathLike, limit: Optional[int], keep: List[str] = ()) -> List[str]:
    """Keep the last ``limit`` complete checkpoints the run marker lists (and those of
    ``keep``); delete the older ones and the leftovers of saves cut short before them. Folders
    the marker does not list are never candidates. Returns the names deleted."""
    if limit is None or limit <= 0:
        return []
    found = checkpoints(out)
    complete = sorted((n for n, s in found.items() if s == "complete"), key=_step)
    if not complete:
        return []
    kept = set(complete[-limit:]) | set(keep)
    newest = _step(complete[-1])
    gone = [n for n in sorted(found, key=_step) if n not in kept and _step(n) < newest]
    for name in gone:
        logger.info(f"deleting {Path(out) / name} (--save-total-limit {limit})")
        remove(out, name)
    return gone
