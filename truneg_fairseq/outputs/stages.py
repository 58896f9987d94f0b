"""Which inputs and flags made a finished stage of a pipeline or recipe (a warm-up, a data-bin,
a training run), so that a later run reuses the stage only when it would be made the same way.

A stage is described by its command line (or any list of settings): every item that names an
existing file is taken with its fingerprint, every item that names a directory with the
fingerprints of the files directly in it (a data-bin: ``dict.txt``, the ``.bin``/``.idx``
shards; not its logs, nor the synonym tables and word vectors built there later: a stage that
reads one names that file), and the stage's own outputs are left out. A fingerprint is the size
and sha256 of the file, of its first and last 4 MiB for a file over 64 MiB (a corpus's shards:
read in milliseconds, and any change of length shows). The description is recorded beside the outputs
(:data:`STAGES`, one JSON object of ``{stage: description}``) once the stage has finished;
:func:`stale` says what differs when the stage is asked for again.

``python -m truneg_fairseq.cli.stage_record check|record DIR NAME [--output PATH]... -- CMD...``
(:func:`main`) does the same for shell recipes (``check`` exits 0 when DIR's record of NAME is
CMD's, 1 with what differs on stderr, 3 when there is no record).

Standard library only."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

from .atomic import atomic_open

STAGES = ".truneg-stages.json"
# files of a directory that are not what a stage reads from it (logs, and the synonym tables and
# word vectors built beside a data-bin: a stage that reads one names the file itself)
_SIDE = (".log", ".npz", ".npy")
WHOLE = 64 << 20  # files up to this size are hashed whole
PART = 4 << 20  # of larger files: the first and last PART bytes


def _file_fingerprint(path: str) -> str:
    size = os.path.getsize(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= WHOLE:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:
            h.update(f.read(PART))
            f.seek(size - PART)
            h.update(f.read(PART))
    return f"{size}:{h.hexdigest()[:32]}"


def _is_output(path: str, outputs: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    for out in outputs:
        top = os.path.realpath(out)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


def describe(
    items: Sequence[object], outputs: Sequence[str] = (), root: Optional[str] = None
) -> List[str]:
    """The description of a stage made by ``items`` (its command line), its ``outputs`` (files
    or directories) left out: each item as given (a path under ``root`` as ``<root>/...``, so
    that a moved work directory is still itself), followed for an existing file by its
    fingerprint, and for a directory by the name and fingerprint of each file directly in it."""
    out: List[str] = []
    top = os.path.realpath(root).rstrip(os.sep) + os.sep if root else None
    for item in map(str, items):
        pathlike = bool(item) and (os.sep in item or os.path.exists(item))
        if pathlike and _is_output(item, outputs):
            out.append("<output>")
            continue
        real = os.path.realpath(item) if pathlike else ""
        if top and (real + os.sep).startswith(top):
            item = "<root>/" + real[len(top) :]
        out.append(item)
        if not pathlike or not os.path.exists(real):
            continue
        if os.path.isfile(real):
            out.append(f"  {_file_fingerprint(real)}")
        elif os.path.isdir(real):
            for name in sorted(os.listdir(real)):
                path = os.path.join(real, name)
                if not name.startswith(".") and not name.endswith(_SIDE) and os.path.isfile(path):
                    if not _is_output(path, outputs):
                        out.append(f"  {name} {_file_fingerprint(path)}")
    return out


def _read(record_dir: str) -> Dict[str, List[str]]:
    path = os.path.join(record_dir, STAGES)
    try:
        if os.path.islink(path) or os.path.getsize(path) > 16 << 20:
            return {}
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
    }


def stale(record_dir: str, name: str, description: Sequence[str]) -> Optional[str]:
    """None when ``record_dir`` records stage ``name`` as made from ``description``; else what
    differs, in a few words (no record at all: said as such)."""
    recorded = _read(record_dir).get(name)
    if recorded is None:
        return f"no record of what made it ({os.path.join(record_dir, STAGES)})"
    if recorded == list(description):
        return None
    differ = [f"{a.strip()!s} -> {b.strip()!s}" for a, b in zip(recorded, description) if a != b][
        :3
    ]
    if len(recorded) != len(description):
        differ.append(f"{len(recorded)} settings recorded, {len(description)} now")
    return "made from other inputs or flags (" + "; ".join(differ) + ")"


def record(record_dir: str, name: str, description: Sequence[str]) -> None:
    """Record that stage ``name`` under ``record_dir`` was made from ``description`` (after it
    finished; the file is replaced atomically)."""
    data = _read(record_dir)
    data[name] = list(description)
    os.makedirs(record_dir, exist_ok=True)
    with atomic_open(os.path.join(record_dir, STAGES), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def forget(record_dir: str, name: str) -> None:
    """Drop the record of stage ``name`` (before the stage is made again)."""
    data = _read(record_dir)
    if data.pop(name, None) is not None:
        with atomic_open(os.path.join(record_dir, STAGES), "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m truneg_fairseq.cli.stage_record check|record DIR NAME "
              "[--output PATH]... -- CMD...", file=sys.stderr)  # fmt: skip
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m truneg_fairseq.cli.stage_record")
    p.add_argument("action", choices=("check", "record"))
    p.add_argument("dir")
    p.add_argument("name")
    p.add_argument("--output", action="append", default=[])
    args = p.parse_args(argv[:cut])
    description = describe(argv[cut + 1 :], [args.dir, *args.output])
    if args.action == "record":
        record(args.dir, args.name, description)
        return 0
    why = stale(args.dir, args.name, description)
    if why is None:
        return 0
    print(why, file=sys.stderr)
    return 3 if why.startswith("no record") else 1
