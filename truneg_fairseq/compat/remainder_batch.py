"""Every sequence is batched (``keep_remainder_batch``): fairseq 0.12's
``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
``--required-batch-size-multiple`` (default 8), so up to 7 sequences of every split were
never seen: never scored by validation (``fairseq-train``'s valid steps, ``fairseq-validate``;
the dataset's sequences are sorted by length there, so the dropped ones are the longest) and
never trained on in an epoch (the same function batches ``--train-subset``). The shim gives
those sequences their own final, smaller batch, for every split: the batch fairseq's batching
had already built within ``--max-tokens``/``--batch-size`` before dropping it. Fixed-shape
batching (TPU) is left as it is.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import numpy as np

from .wrapping import wrap_once


def keep_remainder_batch() -> None:
    """Keep the last, partial batch that ``data_utils.batch_by_size`` drops (see the module
    docstring, 10.). fairseq's batching builds batches as consecutive runs of ``indices`` (each
    a multiple of the required size but the last); the indices after the batches it returns are
    exactly the dropped batch, so they are appended as one. fairseq's datasets look the function
    up in the module at each call (``FairseqDataset.batch_by_size``), so replacing the module
    attribute covers every task."""
    from fairseq.data import data_utils

    def keeps_remainder(original):
        def batch_by_size(
            indices,
            num_tokens_fn,
            num_tokens_vec=None,
            max_tokens=None,
            max_sentences=None,
            required_batch_size_multiple=1,
            fixed_shapes=None,
        ):
            if not isinstance(
                indices, np.ndarray
            ):  # an iterator can be read once: as fairseq reads it
                indices = np.fromiter(indices, dtype=np.int64, count=-1)
            batches = original(
                indices,
                num_tokens_fn,
                num_tokens_vec=num_tokens_vec,
                max_tokens=max_tokens,
                max_sentences=max_sentences,
                required_batch_size_multiple=required_batch_size_multiple,
                fixed_shapes=fixed_shapes,
            )
            if fixed_shapes is not None or required_batch_size_multiple <= 1:
                return batches  # nothing is dropped there
            batched = sum(len(b) for b in batches)
            rest = indices[batched:]
            if len(rest) and (
                not batches or np.array_equal(np.concatenate(batches), indices[:batched])
            ):
                batches = list(batches) + [rest]
            return batches

        return batch_by_size

    wrap_once(data_utils, "batch_by_size", keeps_remainder, marker="truneg_keeps_remainder")
