"""An output is never one of the run's inputs: every output flag of a command is compared with
every file the command reads (those named by flags, and those it reads from a data directory or
beside a checkpoint), as files -- a symbolic link or a hard link to an input is that input.

Some inputs are known only once the run reads them: the data directory a checkpoint records
(whose ``dict.txt`` is compared with the one given), the ``dict.txt`` found beside a checkpoint,
a text file a pipeline opens. The readers of the package say each file they read
(:func:`reading`: the checkpoint loader and the data directory it resolves, ``read_lines`` and
the corpus reader, the synonym table loader, every binarized split fairseq opens); a command declares its outputs once (:func:`declare_outputs`, done by
:func:`refuse_inputs_as_outputs` of ``cli/common.py``), and a file read that is a declared output
is one :class:`InputAsOutputError` naming the output's flag and the input, at the moment it is
read, before anything is written. The outputs a command is about to write are compared with
every file it has read (:func:`refuse_read_outputs`) as well."""

import os
from typing import Iterable, Mapping, Tuple, Union

from .output_errors import InputAsOutputError, OutputDirError

Named = Union[Mapping[str, object], Iterable[Tuple[str, object]]]


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` are one file on disk (links followed); a missing path is
    no file."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _pairs(named: Named):
    items = named.items() if isinstance(named, Mapping) else named
    return [(flag, os.fspath(p)) for flag, p in items if p]


def files_in(directory, names) -> list:
    """The paths ``directory/NAME`` of ``names`` that exist (a data directory's files a command
    reads)."""
    if not directory:
        return []
    return [os.path.join(directory, n) for n in names if os.path.isfile(os.path.join(directory, n))]


def split_files(directory, split: str) -> list:
    """The files of a binarized split in ``directory``: ``SPLIT.bin``/``.idx`` and its shards
    (``SPLIT1.bin``, ...)."""
    if not directory or not os.path.isdir(directory):
        return []
    return sorted(
        os.path.join(directory, n)
        for n in os.listdir(directory)
        if n.startswith(split)
        and n.endswith((".bin", ".idx"))
        and n[len(split) : -4].isdigit()
        or n in (f"{split}.bin", f"{split}.idx")
    )


def refuse_inputs_as_outputs(outputs: Named, inputs: Named, error=OutputDirError) -> None:
    """``outputs`` and ``inputs`` are ``{flag: path}`` (or ``(flag, path)`` pairs; a flag may
    name several files). An output that is the same file as an input (:func:`same_file`), or as
    another output, is one ``error`` naming both flags and the file, before anything is written."""
    outs, ins = _pairs(outputs), _pairs(inputs)
    for i, (flag, out) in enumerate(outs):
        for other, path in ins:
            if same_file(out, path):
                shown = path if os.path.abspath(path) == os.path.abspath(out) else f"{path} ({out})"
                raise error(
                    f"{flag} {out} is the {other} input {shown}: writing it would replace that "
                    f"input; nothing was written. Give {flag} another file"
                )
        for other, path in outs[:i]:
            if os.path.abspath(path) == os.path.abspath(out) or same_file(out, path):
                raise error(
                    f"{flag} {out} is also the {other} output {path}: give each output its own "
                    "file; nothing was written"
                )


# the command running in this process: its declared outputs, the files it read (a command run
# inside another, depth > 1, adds to them)
_run = {"depth": 0, "outputs": [], "read": []}


def begin_run() -> None:
    """A command starts: nothing declared or read yet; files read are kept until
    :func:`end_run`."""
    if _run["depth"] == 0:
        _run.update(outputs=[], read=[])
    _run["depth"] += 1


def end_run() -> None:
    """The command has ended: forget its outputs and the files it read."""
    _run["depth"] = max(0, _run["depth"] - 1)
    if _run["depth"] == 0:
        _run.update(outputs=[], read=[])


def declare_outputs(outputs: Named) -> None:
    """Output files of the command now running (``{flag: path}``, added to those declared
    before)."""
    _run["outputs"] = _run["outputs"] + [p for p in _pairs(outputs) if p not in _run["outputs"]]


def reading(path, what: str) -> None:
    """Say that the command reads file ``path`` (``what``: which input it is, for the messages,
    without an article: "synonym table"): one :class:`InputAsOutputError` when it is one of the
    declared outputs."""
    if not path:
        return
    path = os.fspath(path)
    for flag, out in _run["outputs"]:
        if same_file(out, path):
            raise InputAsOutputError(
                f"{flag} {out} is the {what} ({path}), which this run reads: writing it would "
                f"replace that input; nothing was written. Give {flag} another file"
            )
    if _run["depth"]:
        _run["read"].append((what, path))


def refuse_read_outputs(outputs: Named, error=OutputDirError) -> None:
    """:func:`refuse_inputs_as_outputs` of ``outputs`` against every file the run has said it
    read (:func:`reading`)."""
    refuse_inputs_as_outputs(outputs, list(_run["read"]), error)
