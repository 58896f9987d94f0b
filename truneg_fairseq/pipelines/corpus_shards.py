"""A binarized training split in shards: fairseq's way past an index of every line in memory.

fairseq's ``masked_lm`` task (and the plugin's tasks built on it) reads ``DATA`` as
``dir0:dir1:...`` and trains epoch ``e`` on the training split of ``dir[(e - 1) % n]``; the
dictionary and the validation split come from ``dir0``. A data-bin of a 16 GB corpus in one
split makes every training process hold an index of all its lines (about 50 bytes a line:
5 GB at 16 GB, docs/paper-scale.md); in shards, one shard's.

``truneg-prepare-corpus --shards N`` writes shard 0 as ``data-bin/train.{bin,idx}`` (beside
``dict.txt`` and the validation split, as without shards) and shard ``k`` as
``data-bin/shard{k}/train.{bin,idx}`` with a copy of ``dict.txt``; :func:`data_arg` is the
``DATA`` argument to give. The shards are consecutive runs of the split's lines, of about the
same size; joined in order they are the unsharded split, byte for byte."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Sequence


def shard_dir(data_bin: os.PathLike, k: int) -> Path:
    """Where shard ``k`` of ``data_bin``'s training split lives (shard 0: the data-bin)."""
    return Path(data_bin) if k == 0 else Path(data_bin) / f"shard{k}"


def data_arg(data_bin: os.PathLike, shards: int) -> str:
    """The ``DATA`` argument of fairseq-train for a data-bin written in ``shards`` shards."""
    return ":".join(str(shard_dir(data_bin, k)) for k in range(shards))


def groups(n_parts: int, shards: int) -> List[range]:
    """Consecutive groups of ``n_parts`` parts, ``shards`` of them, as even as counts allow."""
    bounds = [n_parts * k // shards for k in range(shards + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def write_shards(
    prefix: Path,
    parts: Sequence[Path],
    lines: Sequence[int],
    dtype,
    shards: int,
    join,
    write_index,
) -> List[int]:
    """Join the binarized ``parts`` (each with its ``.sizes`` file and ``lines[i]`` lines) into
    ``shards`` shards of the split ``prefix`` (``join(parts, bin_path)`` and
    ``write_index(idx_path, dtype, sizes_paths, n)``: the binarizer's own); returns the lines of
    each shard. Every shard but 0 gets the dictionary beside it."""
    counts = []
    for k, group in enumerate(groups(len(parts), shards)):
        where = shard_dir(prefix.parent, k)
        where.mkdir(parents=True, exist_ok=True)
        if k:
            shutil.copyfile(prefix.parent / "dict.txt", where / "dict.txt")
        mine = [parts[i] for i in group]
        n = sum(lines[i] for i in group)
        join(mine, where / f"{prefix.name}.bin")
        write_index(where / f"{prefix.name}.idx", dtype, [Path(f"{p}.sizes") for p in mine], n)
        counts.append(n)
    return counts
