"""The statistics a training run logged (``fairseq-train`` or ``truneg-hf-train``), read back
from its log or its tensorboard folder.

* a ``fairseq-train`` run: its log (the stdout or its ``--log-file``, in ``--log-format simple``
  or ``json``) or its ``--tensorboard-logdir`` (one folder per log tag: ``train_inner``,
  ``train``, ``valid``);
* a ``truneg-hf-train`` run: its log (the saved stdout: ``name value | ... | num_updates N``
  lines) or its tensorboard folder (``OUTPUT_DIR/runs``, or ``OUTPUT_DIR`` itself: tags
  ``train/NAME`` and ``eval/NAME`` as transformers writes them).

Tensorboard event files are read with the protocol buffers tensorboardX installs (TensorBoard
itself is not needed), every record's length and checksums checked against the file before its
data is read: a damaged or forged file is one :class:`LogReadError` naming it, and no record
makes this read more than the file holds. A text log is read line by line, an over-long line
skipped unread.

Each record is (tag, update, {name: value}, origin): ``train_inner`` the training lines of each
logging interval, ``train`` the end of a fairseq epoch, and a validation subset's name (``valid``;
truneg-hf-train's evaluations are ``valid`` too); ``update`` is the ``num_updates`` (the step)
the line reports; ``origin`` the front end that wrote it, which says the units of its losses
(:func:`loss_bits`).
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional

from truneg_fairseq.data.event_records import (  # noqa: F401
    _decode_events,
    _event_class,
    event_files,
)
from truneg_fairseq.errors import (
    LogReadError,  # noqa: F401  (defined in the one place of the errors)
)

logger = logging.getLogger(__name__)

FAIRSEQ, HF = "fairseq-train", "truneg-hf-train"


class LogRecord(NamedTuple):
    tag: str
    update: int
    values: Dict[str, float]
    origin: str = FAIRSEQ


@dataclass
class TrainingRun:
    """What one source holds: its records, the criterion (or truneg-hf-train objective) the run
    was trained with when the source says it, and the front end that wrote it."""

    source: str
    records: List[LogRecord] = field(default_factory=list)
    criterion: Optional[str] = None
    origin: str = FAIRSEQ
    cut_short: List[str] = field(default_factory=list)  # event files that end inside a record


# ---- units -------------------------------------------------------------------------------------
def loss_bits(values: Dict[str, float], origin: str) -> Optional[float]:
    """The loss of a record in bits: the MLM part where the criterion logs one (``mlm_loss``),
    the whole loss otherwise. fairseq logs bits (its convention); transformers logs nats, so
    truneg-hf-train's ``loss``/``mlm_loss`` are nats and a value it keeps in bits is named
    ``NAME_bits``. Its logs written before it named units logged bits unsuffixed: those are
    told by their perplexity, which is 2 ** bits = e ** nats whatever the unit."""
    for name in ("mlm_loss_bits", "loss_bits"):
        if name in values:
            return values[name]
    for name in ("mlm_loss", "loss"):
        if name not in values:
            continue
        value = values[name]
        if origin == FAIRSEQ:
            return value
        ppl = values.get("ppl")
        if name == "mlm_loss" and ppl and ppl > 1 and math.isfinite(ppl):
            if abs(value - math.log2(ppl)) < abs(value - math.log(ppl)):
                return value
        return value / math.log(2)
    return None


# ---- text logs ---------------------------------------------------------------------------------
# simple format: "epoch 001:     10 / 23 loss=7.03, ..., num_updates=10, ..." (train_inner),
# "epoch 001 | valid on 'valid' subset | loss 7.04 | ... | num_updates 3",
# "epoch 001 | loss 7.017 | ... | num_updates 6" (the end of an epoch, tag train)
_INNER = re.compile(r"epoch \d+:\s+\d+ / \d+ (.*)$")
_VALID = re.compile(r"epoch \d+ \| valid on '([^']+)' subset \| (.*)$")
_EPOCH = re.compile(r"\| train \| epoch \d+ \| (.*)$|^epoch \d+ \| (?!valid on)(.*)$")
# json format: "... | INFO | train_inner | {...}", "... | valid | {...}"; a --log-file holds
# the object alone (its tag only in its keys' prefix). Found with str.find, not a regex search
# (which retries at every '{"epoch": ' of a line: quadratic on a line made to be slow).
_JSON_START = '{"epoch": '
_JSON_TAG = re.compile(r"\| (\w+) \| $")
# truneg-hf-train: "... | INFO | LOGGER | loss 7.9 | ... | epoch 0.08 | num_updates 2", its
# evaluations with eval_ names
_NAME = re.compile(r"[A-Za-z_][\w/]*")
# what transformers reports once at the end of training (run-wide means and timings), and
# per evaluation besides the metrics: not statistics of an update
_HF_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
_HF_SUMMARY |= {"total_flos", "train_loss", "runtime", "samples_per_second", "steps_per_second"}

# the criterion a run was trained with, from the lines a run logs before training: fairseq's
# config (a dict, or the Namespace of older releases) and truneg-hf-train's "objective X on ..."
_CRITERION = (
    re.compile(r"'criterion': \{'_name': '(\w+)'"),
    re.compile(r"\bcriterion='(\w+)'"),
    re.compile(r"\| objective (\w+)( \(ELECTRA\))? on \w+"),
)

MAX_LINE = 1 << 20  # a log line is a few kB (fairseq's config the longest): longer is not one


def _lines(f, limit: int = MAX_LINE) -> Iterator[str]:
    """The lines of text file ``f``, each read at most ``limit`` characters at a time: a longer
    one (a file that is no log, one long binary line) is skipped without holding it whole."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith("\n"):
            while True:  # the rest of the over-long line, in pieces
                rest = f.readline(limit)
                if not rest or rest.endswith("\n"):
                    break
            continue
        yield line


def _numbers(pairs: Iterable[tuple]) -> Dict[str, float]:
    out = {}
    for key, value in pairs:
        try:
            out[key.strip()] = float(value)
        except (TypeError, ValueError):
            continue
    return out


def _from_json(tag, text: str):
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if tag is None:  # a --log-file line: the tag from the keys' prefix
        prefixes = {k.split("_", 1)[0] for k in obj if k != "epoch" and "_" in k}
        tag = prefixes.pop() if len(prefixes) == 1 and "num_updates" not in obj else "train_inner"
    prefix = tag + "_"
    values = _numbers(
        (k[len(prefix) :] if k.startswith(prefix) else k, v)
        for k, v in obj.items()
        if k not in ("epoch", "update")
    )
    return tag, values


def _trailing_pairs(line: str) -> Optional[List[str]]:
    """The ``name value`` items that end ``line`` with ``num_updates N`` last (a
    truneg-hf-train line), else None."""
    items = line.rstrip().split(" | ")
    if not items[-1].startswith("num_updates "):
        return None
    pairs = []
    for item in reversed(items):
        name, _, value = item.partition(" ")
        if not _NAME.fullmatch(name) or not value or " " in value:
            break
        pairs.append(item)
    return pairs[::-1]


def _hf_line(pairs: List[str]):
    """(tag, values) of a truneg-hf-train line; None for its end-of-training summary."""
    values = _numbers(item.split(" ", 1) for item in pairs)
    if "train_runtime" in values:
        return None
    tag = "train_inner"
    if any(k.startswith("eval_") for k in values):
        tag = "valid"
        values = {k[5:] if k.startswith("eval_") else k: v for k, v in values.items()}
    values.pop("epoch", None)
    return tag, {k: v for k, v in values.items() if k not in _HF_SUMMARY}


def _update(value) -> Optional[int]:
    """``num_updates`` as an int; None for a value no run logs (negative, fractional, not
    finite, past int64)."""
    if not (isinstance(value, float) and math.isfinite(value) and value == int(value)):
        return None
    return int(value) if 0 <= value < 2**63 else None


def _parse_line(line: str):
    """(tag, values, origin) of a statistics line, else None."""
    tag = values = None
    origin = FAIRSEQ
    start = line.find(_JSON_START)
    if start >= 0 and line.rstrip().endswith("}"):
        m = _JSON_TAG.search(line[max(0, start - 80) : start])
        parsed = _from_json(m.group(1) if m else None, line[start:].rstrip())
        if parsed:
            tag, values = parsed
    elif (m := _INNER.search(line)) is not None:
        tag = "train_inner"
        values = _numbers(item.split("=", 1) for item in m.group(1).split(", ") if "=" in item)
    elif (m := _VALID.search(line)) is not None:
        tag = m.group(1)
        values = _numbers(item.rsplit(" ", 1) for item in m.group(2).split(" | ") if " " in item)
    elif (m := _EPOCH.search(line)) is not None:
        tag = "train"
        body = m.group(1) if m.group(1) is not None else m.group(2)
        values = _numbers(item.rsplit(" ", 1) for item in body.split(" | ") if " " in item)
    elif (pairs := _trailing_pairs(line)) is not None:
        parsed = _hf_line(pairs)
        if parsed:
            (tag, values), origin = parsed, HF
    if not values or "num_updates" not in values:
        return None
    return tag, values, origin


def parse_log_lines(lines: Iterable[str]) -> List[LogRecord]:
    """The :class:`LogRecord` of every statistics line among ``lines`` (others are skipped)."""
    return _parse_run(lines, "").records


def _parse_run(lines: Iterable[str], source: str) -> TrainingRun:
    run = TrainingRun(source)
    for line in lines:
        line = line.rstrip("\n")
        if run.criterion is None:
            for pattern in _CRITERION:
                m = pattern.search(line)
                if m:
                    run.criterion = m.group(1) + (" (ELECTRA)" if m.lastindex == 2 else "")
                    break
        parsed = _parse_line(line)
        if parsed is None:
            continue
        tag, values, origin = parsed
        update = _update(values.pop("num_updates"))
        if update is not None:
            run.records.append(LogRecord(tag, update, values, origin))
    if run.records:
        run.origin = run.records[0].origin
    return run


# ---- tensorboard event files -------------------------------------------------------------------
def _hf_tag(tag: str):
    """(log tag, name) of a transformers tensorboard tag (``train/loss``, ``eval/mlm_acc``);
    None for one that is not a statistic of an update."""
    split, name = tag.split("/", 1)
    if name in _HF_SUMMARY or name == "epoch" or split not in ("train", "eval"):
        return None
    return ("valid" if split == "eval" else "train_inner"), name


_ARGV_CRITERION = re.compile(r"--criterion[= ](\w+)")


def read_events_dir(logdir: str) -> List[LogRecord]:
    """The scalars of a tensorboard folder: one :class:`LogRecord` per log tag and step."""
    return _read_events_run(logdir).records


def _read_events_run(logdir: str) -> TrainingRun:
    from truneg_fairseq.outputs import reading

    Event = _event_class()
    run = TrainingRun(logdir)
    by_key: Dict[tuple, Dict[str, float]] = {}
    for path in event_files(logdir):
        reading(path, "tensorboard events file")
        folder_tag = os.path.basename(os.path.dirname(path))
        for event in _decode_events(path, Event, run.cut_short):
            for v in event.summary.value:
                kind = v.WhichOneof("value")
                if kind == "tensor" and v.tag.startswith("sys.argv") and run.criterion is None:
                    argv = b"".join(v.tensor.string_val).decode("utf-8", "replace")
                    m = _ARGV_CRITERION.search(argv)
                    run.criterion = m.group(1) if m else None
                if kind != "simple_value":
                    continue
                if "/" in v.tag:  # transformers' train/NAME, eval/NAME
                    tagged = _hf_tag(v.tag)
                    if tagged is None:
                        continue
                    (tag, name), origin = tagged, HF
                else:  # fairseq: a folder per log tag
                    tag, name, origin = folder_tag, v.tag, FAIRSEQ
                # float32 in the file: back to the digits the log shows
                value = float(f"{v.simple_value:.6g}")
                step = int(event.step)
                if 0 <= step < 2**63:
                    by_key.setdefault((origin, tag, step), {})[name] = value
    run.records = [
        LogRecord(tag, step, values, origin)
        for (origin, tag, step), values in sorted(by_key.items(), key=lambda kv: kv[0][1:])
    ]
    if run.records:
        run.origin = run.records[0].origin
    if run.origin == HF and run.criterion is None:
        run.criterion = _hf_objective(logdir)
    return run


def _hf_objective(logdir: str) -> Optional[str]:
    """The objective of the truneg-hf-train run whose tensorboard folder is ``logdir`` (its
    output directory, or its ``runs`` folder or one below), from the run record of its newest
    checkpoint; None where there is none."""
    top = os.path.abspath(logdir)
    for out in (top, os.path.dirname(top), os.path.dirname(os.path.dirname(top))):
        records = glob.glob(os.path.join(out, "checkpoint-*", "truneg_run.json"))
        steps = [(int(s), p) for p in records if (s := p.split("-")[-1].split(os.sep)[0]).isdigit()]
        for _, path in sorted(steps, reverse=True):
            try:
                if os.path.getsize(path) > MAX_LINE:
                    continue
                with open(path, encoding="utf-8") as f:
                    settings = json.load(f).get("settings")
                objective = settings.get("objective")
            except (OSError, ValueError, RecursionError, AttributeError):
                continue
            if isinstance(objective, str) and objective.isidentifier():
                electra = " (ELECTRA)" if settings.get("generator") else ""
                return objective + electra
    return None


# ---- one entry point ---------------------------------------------------------------------------
def read_run(path: str) -> TrainingRun:
    """The :class:`TrainingRun` of a log file or tensorboard folder; a source that holds no
    statistics line is one :class:`LogReadError` saying what to give."""
    from truneg_fairseq.outputs import reading

    if os.path.isdir(path):
        run = _read_events_run(path)
        if not run.records:
            damaged = "".join(f"; {why}" for why in run.cut_short)
            raise LogReadError(
                f"{path} holds no tensorboard events (events.out.tfevents.* in train_inner/, "
                "valid/, ... as fairseq-train's --tensorboard-logdir writes them, or in runs/ as "
                f"truneg-hf-train writes them){damaged}: give such a folder, or the run's log file"
            )
        return run
    if not os.path.isfile(path):
        raise LogReadError(
            f"{path} not found: give a training log (fairseq-train's or truneg-hf-train's) or "
            "a tensorboard folder"
        )
    reading(path, "training log")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            run = _parse_run(_lines(f), path)
    except OSError as e:
        raise LogReadError(f"{path}: cannot be read ({e.strerror or e})") from None
    if not run.records:
        raise LogReadError(
            f"{path} holds no training or validation lines with num_updates: give the stdout "
            "of fairseq-train or its --log-file (--log-format simple or json), or the saved "
            "stdout of truneg-hf-train"
        )
    return run


def read_training_log(path: str) -> List[LogRecord]:
    """The records of :func:`read_run`."""
    return read_run(path).records
