"""What ``truneg-hf-train``'s ``--train`` / ``--valid`` name (:func:`text_source`), checked
before any work, and the lines of its text files (:func:`file_lines`, :func:`line_groups`).

An input is text files (plain, ``.gz``, ``.bz2``, ``.xz``, told apart by their first bytes; one
example per non-empty line), folders of them (``*.txt``, ``*.txt.gz``, ``*.txt.bz2``,
``*.txt.xz``, sorted), several of these in the order given, a directory written by
``Dataset.save_to_disk``, or, through the Python API, a ``datasets.Dataset``. Lines end at
``\\n`` (a ``\\r`` before it dropped) or, in a file without any, at ``\\r``
(:mod:`truneg_fairseq.text.lines`).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, List, Optional

from truneg_fairseq.errors import CorpusError, HFTrainError

TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.bz2", ".txt.xz")
LINES_PER_ROW = 1000  # lines a group: one Arrow row of the untokenized text, one tokenizer call
INPUTS = (
    "a text file (.gz/.bz2/.xz too), a folder of .txt files, several of these, or a directory "
    "written by datasets' save_to_disk"
)
# decompressors by their files' first bytes, whatever the file is called
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))


# ---- what --train / --valid name -------------------------------------------------------------
@dataclass
class TextSource:
    flag: str
    shown: str  # the input as given, for the log and the messages
    files: List[Path] = field(default_factory=list)  # text files, in reading order
    saved: Optional[Path] = None  # a save_to_disk directory
    dataset: Any = None  # a datasets.Dataset given to the API


def _is_dataset(value) -> bool:
    mod = sys.modules.get("datasets")
    return mod is not None and isinstance(value, (mod.Dataset, mod.DatasetDict))


def input_paths(value) -> List[str]:
    """The paths ``--train``/``--valid`` name (one, several, or none for a dataset object)."""
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) for v in value]
    return []


def _saved_dir(p: Path) -> bool:
    return p.is_dir() and any((p / n).is_file() for n in ("state.json", "dataset_dict.json"))


def text_source(value, flag: str, streaming: bool = False) -> TextSource:
    """What ``value`` names, checked (nothing is read yet); one :class:`HFTrainError` naming
    ``flag`` and what it takes otherwise."""
    if _is_dataset(value):
        if not isinstance(value, sys.modules["datasets"].Dataset):
            raise HFTrainError(
                f"{flag}: a DatasetDict ({', '.join(value)}); give one split, e.g. data['train']"
            )
        if streaming:
            raise HFTrainError(f"{flag}: streaming reads text files; a Dataset is read as it is")
        return TextSource(flag, f"a Dataset of {len(value)} rows", dataset=value)
    paths = input_paths(value)
    if not paths:
        raise HFTrainError(f"{flag}: give {INPUTS}")
    files: List[Path] = []
    for path in paths:
        p = Path(path)
        if _saved_dir(p):
            if (p / "dataset_dict.json").is_file():
                splits = sorted(q.name for q in p.iterdir() if _saved_dir(q))
                raise HFTrainError(
                    f"{flag} {path} holds a DatasetDict (splits {', '.join(splits)}): give one "
                    f"split's directory, e.g. {p / (splits[0] if splits else 'train')}"
                )
            if len(paths) > 1 or streaming:
                why = "--streaming reads text files" if streaming else "give it alone"
                raise HFTrainError(f"{flag} {path} is a dataset saved with save_to_disk: {why}")
            return TextSource(flag, path, saved=p)
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            found = sorted(
                q for q in p.rglob("*") if q.name.endswith(TEXT_SUFFIXES) and q.is_file()
            )
            if not found:
                raise HFTrainError(
                    f"{flag} {path} is a folder without text files (*.txt, *.txt.gz, *.txt.bz2, "
                    "*.txt.xz) and not a directory written by save_to_disk"
                )
            files += found
        else:
            raise HFTrainError(f"{flag} {path} not found ({INPUTS})")
    from truneg_fairseq.outputs import reading

    for f in files:
        reading(f, "text file")  # an output of the command may not be it
    return TextSource(flag, ", ".join(paths), files)


# ---- reading lines ------------------------------------------------------------------------------
def _open_binary(path: Path):
    with open(path, "rb") as f:
        head = f.read(8)
    module = next((m for magic, m in _MAGIC if head.startswith(magic)), None)
    return importlib.import_module(module).open(path, "rb") if module else open(path, "rb")


def file_lines(path: Path, flag: str) -> Iterator[str]:
    """The lines of a text file, plain or compressed, line endings removed
    (:func:`truneg_fairseq.text.lines.binary_lines`); a line that is not UTF-8, a line longer
    than any example and a damaged compressed file are one :class:`HFTrainError` each."""
    from truneg_fairseq.text.lines import binary_lines

    number = 0
    try:
        with _open_binary(path) as f:
            for number, raw in enumerate(binary_lines(f, name=path), 1):
                yield raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HFTrainError(
            f"{flag}: {path} line {number} is not UTF-8 text (convert the file, e.g. with "
            "iconv -f latin1 -t utf-8)"
        ) from None
    except CorpusError as e:  # a line longer than any example (text/lines.py)
        raise HFTrainError(f"{flag}: {e}") from None
    except (OSError, EOFError) as e:  # a truncated or damaged compressed file
        raise HFTrainError(f"{flag}: {path} cannot be read ({e})") from None


def line_groups(files: List[Path], flag: str, non_empty: bool = False) -> Iterator[List[str]]:
    """The lines of ``files`` in groups of :data:`LINES_PER_ROW` (``non_empty``: stripped, the
    empty ones left out)."""
    group: List[str] = []
    for f in files:
        for line in file_lines(Path(f), flag):
            if non_empty:
                line = line.strip()
                if not line:
                    continue
            group.append(line)
            if len(group) == LINES_PER_ROW:
                yield group
                group = []
    if group:
        yield group


def check_run_text(cfg) -> None:
    """A run's ``--train``/``--valid`` and data flags (``cfg``: an ``HFTrainConfig``), before
    any work."""
    streaming = getattr(cfg, "streaming", False)
    text_source(cfg.train, "--train", streaming)
    if cfg.valid:
        text_source(cfg.valid, "--valid")
    if streaming and getattr(cfg, "workers", 0):
        raise HFTrainError(
            "--streaming reads the text in the training process: leave --workers out "
            "(--preprocessing-workers tokenizes --valid)"
        )
    n = getattr(cfg, "preprocessing_workers", None)
    if n is not None and n < 1:
        raise HFTrainError(f"--preprocessing-workers must be >= 1, got {n}")
