"""A data-bin's index is checked against its data (``checked_data_index``).

fairseq's ``MMapIndexedDataset`` (the ``.bin``/``.idx`` pair ``fairseq-preprocess`` writes, read
by every task's ``load_dataset``) trusts the sentence sizes of the ``.idx``: an index claiming a
2**31-token sentence makes ``masked_lm``'s block building run for a minute and take gigabytes
before a traceback about a buffer, and a size that does not match the ``.bin`` reads other
sentences' tokens in silence. With the plugin imported, every opened pair is checked first: each
size at least 0, the sizes summing (times the token width) to exactly the ``.bin``'s bytes and
the pointers following the sizes, in chunks of numpy over the mapped index (no Python loop over
sentences, no copy of the whole index). A mismatch is one :class:`DataIndexError` naming the file
and saying to binarize the data again.

A sample is also bounded by the model's positions where it is used whole (a sentence of a split
read with ``--sample-break-mode eos`` or ``complete``; ``none`` cuts it into blocks):
fairseq's batching ends in a traceback (``Size of sample #N is invalid ...``) after the splits are
built; with the plugin it is one :class:`SampleTooLongError` naming the split's files, the sample
and the positions (``sized_samples``).

The sizes must also describe tokens the ``.bin`` really holds: a sparse file (``truncate -s 1G``)
has the size an index claims and no data on disk, and a sentence it claims is read as zeros. A
sentence of more bytes than four times the bytes the file has on disk (``st_blocks`` x 512; a
compressing file system may store a file in fewer blocks than its size, not that much fewer),
plus 1 MiB, is a :class:`DataIndexError` naming the file and the sentence.

Token ids are bounded by the dictionary they are read with (``bounded_token_ids``): a split
binarized with another ``dict.txt`` (or damaged) can hold an id past its entries (60000 with
124), which fairseq hands to the model's embedding: ``IndexError: index out of range in self``
deep in a forward pass. A split fairseq opens with a dictionary (``load_indexed_dataset``: every
task's ``load_dataset``, fairseq-validate, truneg-evaluate) checks each sentence as it is read:
the smallest and largest id of its tokens (one ``aminmax`` over a sentence already in memory, in
the data loader, not in the training step; scanning a paper-size ``.bin`` at every start would
read all of it). An id outside the dictionary is one :class:`DataIndexError` naming the file,
the sentence, the id and the dictionary's size.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import os
import re

import numpy as np

from truneg_fairseq.errors import (  # noqa: F401  (defined in the one place of the errors)
    DataIndexError,
    SampleTooLongError,
)

from .wrapping import wrap_once

CHUNK = 1 << 22  # index entries checked at a time
STORED_SLACK = 1 << 20  # bytes a sentence may claim beyond 4 x the file's bytes on disk


_INVALID_SIZE = re.compile(
    r"Size of sample #(\d+) is invalid \(=(.*)\) since max_positions=(.*), skip this example"
)


def check_index(prefix: str, sizes, pointers, itemsize: int) -> None:
    """Raise :class:`DataIndexError` unless ``sizes``/``pointers`` (the index of ``prefix``)
    describe ``prefix``.bin exactly."""
    bin_path = f"{prefix}.bin"
    have = os.path.getsize(bin_path)
    total = 0
    why = None
    for start in range(0, len(sizes), CHUNK):
        s = np.asarray(sizes[start : start + CHUNK], dtype=np.int64)
        p = np.asarray(pointers[start : start + CHUNK], dtype=np.int64)
        if s.size and int(s.min()) < 0:
            why = f"a negative sentence size ({int(s.min())})"
            break
        ends = np.cumsum(s) * itemsize + total
        starts = np.concatenate(([total], ends[:-1]))
        if not np.array_equal(p, starts):
            i = start + int(np.flatnonzero(p != starts)[0])
            why = f"sentence {i} starts at byte {int(pointers[i])}, not {int(starts[i - start])}"
            break
        total = int(ends[-1]) if ends.size else total
        if total > have:
            why = f"sizes that reach byte {total} (by sentence {start + s.size - 1})"
            break
    if why is None and total != have:
        why = f"sizes that add up to {total} bytes"
    if why is None:
        why = _unstored_sentence(bin_path, sizes, itemsize)
    if why is not None:
        raise DataIndexError(
            f"{prefix}.idx does not describe {bin_path} ({have} bytes): it has {why}. The pair is "
            "damaged or was not written together; binarize the data again (scripts/prepare_corpus.py "
            "or fairseq-preprocess)"
        )


def _unstored_sentence(bin_path: str, sizes, itemsize: int):
    """Why the largest sentence of ``sizes`` cannot be tokens of ``bin_path`` (a sparse file:
    see the module docstring), or None."""
    blocks = getattr(os.stat(bin_path), "st_blocks", None)
    if blocks is None or not len(sizes):
        return None
    stored = int(blocks) * 512
    bound = 4 * stored + STORED_SLACK
    for start in range(0, len(sizes), CHUNK):
        s = np.asarray(sizes[start : start + CHUNK], dtype=np.int64)
        i = int(np.argmax(s))
        if int(s[i]) * itemsize > bound:
            return (
                f"sentence {start + i} of {int(s[i]):,} tokens ({int(s[i]) * itemsize:,} bytes), "
                f"while the file holds {stored:,} bytes on disk (a sparse file: its size is not data)"
            )
    return None


def checked_data_index() -> None:
    """Check every ``MMapIndexedDataset`` fairseq opens (see the module docstring)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    def checked_on_open(original):
        def _do_init(self, path):
            from truneg_fairseq.outputs import reading

            for ext in (".idx", ".bin"):  # an output of the command may not be a split it reads
                reading(f"{path}{ext}", "binarized split")
            original(self, path)
            index = self._index
            check_index(str(path), index.sizes, index._pointers, index.dtype().itemsize)

        return _do_init

    wrap_once(MMapIndexedDataset, "_do_init", checked_on_open, marker="truneg_checked")


def _split_of(task, dataset) -> str:
    """The files of the split ``dataset`` is (``DATA/SPLIT``), or words for it."""
    datasets = getattr(task, "datasets", None) or {}
    split = next((k for k, v in datasets.items() if v is dataset), None)
    data = getattr(getattr(task, "cfg", None), "data", None)
    if split is None or not data:
        return "a split of the data"
    return os.path.join(str(data).split(os.pathsep)[0], split)


def sized_samples() -> None:
    """A sample longer than the model's positions, met by fairseq's batching where it may not
    be left out, as one :class:`SampleTooLongError` (see the module docstring)."""
    from fairseq.tasks.fairseq_task import FairseqTask

    def said_in_one_error(original):
        def filter_indices_by_size(
            self, indices, dataset, max_positions=None, ignore_invalid_inputs=False
        ):
            try:
                return original(self, indices, dataset, max_positions, ignore_invalid_inputs)
            except Exception as e:
                found = _INVALID_SIZE.match(str(e)) if type(e) is Exception else None
                if found is None:
                    raise
                sample, size, positions = found.groups()
                raise SampleTooLongError(
                    f"{_split_of(self, dataset)}.bin/.idx: sample {sample} has {size} tokens, more "
                    f"than the {positions} positions the model takes (--tokens-per-sample, "
                    "--max-positions): cut long sentences into blocks (--sample-break-mode none), "
                    "leave them out (--skip-invalid-size-inputs-valid-test), or binarize "
                    "shorter lines"
                ) from None

        return filter_indices_by_size

    wrap_once(FairseqTask, "filter_indices_by_size", said_in_one_error, marker="truneg_checked")


def bounded_token_ids() -> None:
    """Every sentence of a split opened with a dictionary is checked against it as it is read
    (see the module docstring)."""
    from fairseq.data import indexed_dataset

    def bounded_by_dictionary(original):
        def make_dataset(path, impl, fix_lua_indexing=False, dictionary=None):
            dataset = original(path, impl, fix_lua_indexing, dictionary)
            if dataset is not None and dictionary is not None:
                setattr(dataset, DataIndexError.BOUND, (len(dictionary), str(path)))
            return dataset

        return make_dataset

    def checked_on_read(original):
        def __getitem__(self, i):
            item = original(self, i)
            bound = getattr(self, DataIndexError.BOUND, None)
            if bound is not None and isinstance(i, int) and item.numel():
                low, high = (int(v) for v in item.aminmax())
                if low < 0 or high >= bound[0]:
                    bad = high if high >= bound[0] else low
                    raise DataIndexError.token_outside(self, f"sentence {i}", bad)
            return item

        return __getitem__

    # the two are replaced together, each with the marker
    if wrap_once(indexed_dataset, "make_dataset", bounded_by_dictionary, marker="truneg_checked"):
        wrap_once(
            indexed_dataset.MMapIndexedDataset,
            "__getitem__",
            checked_on_read,
            marker="truneg_checked",
        )
