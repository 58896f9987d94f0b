"""Tensorboard event files read with checks: a TFRecord file's records (length, its checksum,
the data, its checksum), each length and checksum checked against the file before its data is
read, decoded with the protocol buffers tensorboardX installs; a damaged or forged file is one
:class:`~truneg_fairseq.errors.LogReadError` naming it and the record's byte offset. Read by
:mod:`truneg_fairseq.data.train_logs`."""

from __future__ import annotations

import logging
import os
import struct
from typing import Iterator, List, Optional

from truneg_fairseq.errors import LogReadError

logger = logging.getLogger(__name__)


def _crc32c_table() -> List[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli, reflected
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (the checksum of TFRecord files)."""
    crc, table = 0xFFFFFFFF, _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """The checksum a TFRecord stores: the CRC-32C rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _records(path: str, cut_short: Optional[List[str]] = None) -> Iterator[bytes]:
    """The records of a TFRecord file (what tensorboard event files are): length (8 bytes), its
    checksum (4), the data, its checksum (4). The length's checksum is checked before the
    length is used, and the length against what the file has left before anything is read; a
    checksum that does not match is one :class:`LogReadError`. A record the file ends inside of
    (a run still writing) ends the file, with a log line, said in ``cut_short`` too."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while True:
            head = f.read(12)
            if len(head) < 12:
                return
            (n,) = struct.unpack("<Q", head[:8])
            (n_crc,) = struct.unpack("<I", head[8:])
            if masked_crc(head[:8]) != n_crc:
                raise _damaged(path, offset, "its length's checksum does not match")
            left = size - offset - 12
            if n + 4 > left:
                why = f"{path}: the record at byte {offset} says {n} bytes but the file has {left} left"
                logger.warning(
                    f"{why} (a run still writing it, or a file cut short): read up to there"
                )
                if cut_short is not None:
                    cut_short.append(why)
                return
            data, tail = f.read(n), f.read(4)
            if len(data) < n or len(tail) < 4:  # the file shrank while it was read
                return
            if masked_crc(data) != struct.unpack("<I", tail)[0]:
                raise _damaged(path, offset, "its data's checksum does not match")
            yield data
            offset += 16 + n


def _damaged(path: str, offset: int, why: str) -> LogReadError:
    return LogReadError(
        f"{path} is not a readable tensorboard events file: the record at byte {offset}: {why} "
        "(a damaged file, or not written by tensorboard). Move it out of the folder, or give the "
        "run's log file instead"
    )


def _event_class():
    try:
        from tensorboardX.proto.event_pb2 import Event
    except ImportError:
        raise LogReadError(
            "reading a tensorboard folder needs tensorboardX (pip install tensorboardX); or "
            "give the run's log file"
        ) from None
    return Event


def _decode_events(path: str, Event, cut_short: List[str]) -> Iterator:
    from google.protobuf.message import DecodeError

    offset = 0
    for data in _records(path, cut_short):
        try:
            yield Event.FromString(data)
        except (DecodeError, RecursionError, ValueError) as e:
            raise _damaged(path, offset, f"it is not an event ({e})") from None
        offset += 16 + len(data)


MAX_DEPTH = 3  # OUTPUT_DIR/runs/DATE_HOST/events...: the deepest layout a run writes
_EVENTS = "events.out.tfevents."


def event_files(logdir: str) -> List[str]:
    """The event files at most :data:`MAX_DEPTH` folders below ``logdir``, in the order they
    were started (the time in their name), links to folders not followed."""
    found = []
    top = os.path.abspath(logdir)
    for folder, dirs, files in os.walk(top):
        depth = 0 if folder == top else os.path.relpath(folder, top).count(os.sep) + 1
        if depth >= MAX_DEPTH:
            dirs[:] = []
        found += [os.path.join(folder, n) for n in files if n.startswith(_EVENTS)]

    def started(path):
        stamp = os.path.basename(path)[len(_EVENTS) :].split(".", 1)[0]
        return (int(stamp) if stamp.isdigit() else 0, path)

    return sorted(found, key=started)
