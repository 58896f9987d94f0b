"""The statistics a fairseq training run logged, read back from where it left them: its log (the
stdout of ``fairseq-train`` or its ``--log-file``, in ``--log-format simple`` or ``json``) or its
``--tensorboard-logdir`` (one folder per log tag: ``train_inner``, ``train``, ``valid``, read
with the protocol buffers tensorboardX installs; TensorBoard itself is not needed).

Each record is (tag, update, {name: value}): ``train_inner`` the training lines of each
``--log-interval``, ``train`` the end of an epoch, and a validation subset's name (``valid``)
for its validations; ``update`` is the ``num_updates`` the line reports.
"""

from __future__ import annotations

import glob
import json
import os
import re
import struct
from typing import Dict, Iterable, List, NamedTuple

from truneg_fairseq.errors import (
    LogReadError,  # noqa: F401  (defined in the one place of the errors)
)


class LogRecord(NamedTuple):
    tag: str
    update: int
    values: Dict[str, float]


# simple format: "epoch 001:     10 / 23 loss=7.03, ..., num_updates=10, ..." (train_inner),
# "epoch 001 | valid on 'valid' subset | loss 7.04 | ... | num_updates 3",
# "epoch 001 | loss 7.017 | ... | num_updates 6" (the end of an epoch, tag train)
_INNER = re.compile(r"epoch \d+:\s+\d+ / \d+ (.*)$")
_VALID = re.compile(r"epoch \d+ \| valid on '([^']+)' subset \| (.*)$")
_EPOCH = re.compile(r"\| train \| epoch \d+ \| (.*)$|^epoch \d+ \| (?!valid on)(.*)$")
# json format: "... | INFO | train_inner | {...}", "... | valid | {...}"; a --log-file holds
# the object alone (its tag only in its keys' prefix)
_JSON = re.compile(r"(?:\| (\w+) \| )?(\{\"epoch\": .*\})\s*$")


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
    except ValueError:
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


def parse_log_lines(lines: Iterable[str]) -> List[LogRecord]:
    """The :class:`LogRecord` of every statistics line among ``lines`` (others are skipped)."""
    out = []
    for line in lines:
        line = line.rstrip("\n")
        tag = values = None
        m = _JSON.search(line)
        if m:
            parsed = _from_json(m.group(1), m.group(2))
            if parsed:
                tag, values = parsed
        elif (m := _INNER.search(line)) is not None:
            tag = "train_inner"
            values = _numbers(item.split("=", 1) for item in m.group(1).split(", ") if "=" in item)
        elif (m := _VALID.search(line)) is not None:
            tag = m.group(1)
            values = _numbers(
                item.rsplit(" ", 1) for item in m.group(2).split(" | ") if " " in item
            )
        elif (m := _EPOCH.search(line)) is not None:
            tag = "train"
            body = m.group(1) if m.group(1) is not None else m.group(2)
            values = _numbers(item.rsplit(" ", 1) for item in body.split(" | ") if " " in item)
        if values and "num_updates" in values:
            update = int(values.pop("num_updates"))
            out.append(LogRecord(tag, update, values))
    return out


def _records(path: str) -> Iterable[bytes]:
    """The records of a TFRecord file (what tensorboard event files are): length (8 bytes),
    its checksum (4), the data, its checksum (4); a record cut short by a running job ends it."""
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if len(head) < 12:
                return
            (n,) = struct.unpack("<Q", head[:8])
            data = f.read(n)
            if len(data) < n or len(f.read(4)) < 4:
                return
            yield data


def read_events_dir(logdir: str) -> List[LogRecord]:
    """The scalars of a fairseq ``--tensorboard-logdir``: one :class:`LogRecord` per tag folder
    and step."""
    from tensorboardX.proto.event_pb2 import Event

    out = []
    for folder in sorted(glob.glob(os.path.join(logdir, "*"))):
        files = sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*")))
        if not os.path.isdir(folder) or not files:
            continue
        by_step: Dict[int, Dict[str, float]] = {}
        for path in files:
            for data in _records(path):
                event = Event.FromString(data)
                for v in event.summary.value:
                    if v.WhichOneof("value") == "simple_value":
                        # float32 in the file: back to the digits fairseq logs
                        value = float(f"{v.simple_value:.6g}")
                        by_step.setdefault(int(event.step), {})[v.tag] = value
        tag = os.path.basename(folder)
        out += [LogRecord(tag, step, values) for step, values in sorted(by_step.items())]
    return out


def read_training_log(path: str) -> List[LogRecord]:
    """The records of a fairseq log file or ``--tensorboard-logdir`` folder; a source that holds
    none is one :class:`LogReadError` saying what to give."""
    if os.path.isdir(path):
        records = read_events_dir(path)
        if not records:
            raise LogReadError(
                f"{path} holds no tensorboard events (events.out.tfevents.* in train_inner/, "
                "valid/, ...): give the folder fairseq-train's --tensorboard-logdir named, or the "
                "run's log file"
            )
        return records
    if not os.path.isfile(path):
        raise LogReadError(f"{path} not found: give a fairseq log file or a tensorboard folder")
    with open(path, encoding="utf-8", errors="replace") as f:
        records = parse_log_lines(f)
    if not records:
        raise LogReadError(
            f"{path} holds no training or validation lines with num_updates: give the stdout "
            "of fairseq-train or its --log-file, written with --log-format simple or json"
        )
    return records
