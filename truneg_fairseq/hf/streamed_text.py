"""``truneg-hf-train --streaming``: the training text read and tokenized as training goes,
never converted or cached (:class:`StreamedText`).

The stream has no end: the lines of the files, in the order given, pass after pass. A line's
example index is its number among the non-empty lines (from 0), with the pass in the bits above
:data:`LINE_BITS`: the masks are new at every pass (the first pass masks a line as the
memory-mapped path's first epoch does), and a resumed run, which ``Trainer`` brings to its place
by reading the stream again from its start, sees the same lines with the same masks. Under
torchrun the first process reads and collates every process's batch, and ``accelerate`` hands
each process its own (its ``dispatch_batches`` for iterable data sets); the batches are padded to
``--seq-len`` so that they can be joined, and K processes then make the updates of one process
with ``--grad-accum K``.

What it gives up against the memory-mapped path (docs/hf.md): no shuffling (every pass in file
order), no example count in the log and no empty-line or cut-line count, a resume that reads and
tokenizes again everything trained so far before its first step, the text read in the training
process (``--workers`` is refused), and rows padded to ``--seq-len``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import List

import torch

from truneg_fairseq.errors import HFTrainError
from truneg_fairseq.hf.text_inputs import line_groups

LINE_BITS = 36  # lines of one pass below 2**36; the collator's index keeps 44 bits
PASSES = 1 << 8  # pass numbers in the index, cycling after 256 passes


class StreamedText(torch.utils.data.IterableDataset):
    """``{"input_ids": ids, "index": pass << LINE_BITS | line}`` for every non-empty line of
    ``files`` (stripped, cut at ``seq_len`` tokens), pass after pass, without end."""

    def __init__(self, files: List[Path], flag: str, tokenizer, seq_len: int):
        self.files, self.flag = [Path(f) for f in files], flag
        self.tokenizer, self.seq_len = tokenizer, int(seq_len)

    def __iter__(self):
        from truneg_fairseq.hf.collator import tokenize_lines

        if torch.utils.data.get_worker_info() is not None:
            raise HFTrainError(
                "--streaming reads the text in the training process: leave --workers out"
            )
        for n in itertools.count():
            line = 0
            high = (n % PASSES) << LINE_BITS
            for group in line_groups(self.files, self.flag, non_empty=True):
                for ids in tokenize_lines(self.tokenizer, group, self.seq_len):
                    yield {"input_ids": ids, "index": high | line}
                    line += 1
            if not line:
                shown = ", ".join(str(f) for f in self.files)
                raise HFTrainError(f"{self.flag} {shown} holds no text (empty lines only)")
