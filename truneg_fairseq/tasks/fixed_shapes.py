"""Training batches of one shape for a compiled step (``--electra-compile``,
``--batch-mlm-compile``): :func:`full_batches_only` keeps the batches of the full shape and counts
the others in the log."""

import logging
from typing import Optional

logger = logging.getLogger(__name__)


def full_batches_only(
    epoch_iter,
    log_name: str = "training",
    flag: str = "--electra-compile",
    padded: bool = False,
    log: Optional[logging.Logger] = None,
) -> None:
    """Keep only the batches of ``epoch_iter`` with the full shape: as many sequences as the
    largest batch, and (unless ``padded``: every batch is padded to --tokens-per-sample columns
    by its collater) padded to the longest sequence of all. Under ``flag`` every new shape
    compiles the step again (and, past the recompile limit, leaves it eager), and the last batch
    of an epoch is usually short. It is dropped, not padded: rows of padding would have to be
    kept out of every count and loss (RTD, the sentence-level KL of an empty sentence), while
    dropping loses fewer than one batch of sequences per epoch, and not the same ones each epoch
    (the order of the sequences is shuffled per epoch before they are batched). The count is
    logged (to ``log``, the task's logger)."""
    import numpy as np

    dataset = epoch_iter.dataset
    log = log or logger

    def filtered(batches):
        batches = list(batches)
        if not batches:
            return batches
        n_full = max(len(b) for b in batches)
        if padded:
            kept = [b for b in batches if len(b) == n_full]
        else:
            lengths = _num_tokens(
                dataset, np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])
            )
            ends = np.cumsum([len(b) for b in batches])
            longest = [
                int(lengths[e - len(b) : e].max()) if len(b) else 0 for b, e in zip(batches, ends)
            ]
            t_full = max(longest)
            kept = [b for b, t in zip(batches, longest) if len(b) == n_full and t == t_full]
        if len(kept) < len(batches):
            if padded:
                log.info(
                    "%s: %d of %d %s batches dropped (fewer than %d sequences; every batch is "
                    "padded to --tokens-per-sample columns): the compiled model sees one shape",
                    flag,
                    len(batches) - len(kept),
                    len(batches),
                    log_name,
                    n_full,
                )
            else:
                log.info(
                    "%s: %d of %d %s batches dropped (fewer than %d sequences or none of %d "
                    "tokens): the compiled stacks see one shape",
                    flag,
                    len(batches) - len(kept),
                    len(batches),
                    log_name,
                    n_full,
                    t_full,
                )
        return kept

    if callable(epoch_iter.batch_sampler):  # --rebuild-batches: made anew each epoch
        make = epoch_iter.batch_sampler
        epoch_iter.batch_sampler = lambda ds, epoch: filtered(make(ds, epoch))
        epoch_iter._frozen_batches = None
    else:
        epoch_iter.batch_sampler = filtered(epoch_iter.batch_sampler)
        epoch_iter._frozen_batches = tuple(epoch_iter.batch_sampler)
    epoch_iter.truneg_full_batches = True


def _num_tokens(dataset, indices):
    """Tokens of each sequence ``indices`` names, from the dataset's size arrays (fairseq's
    masked-LM datasets keep them; ``num_tokens_vec`` is not implemented by all of them)."""
    import numpy as np

    try:
        return np.asarray(dataset.num_tokens_vec(indices))
    except NotImplementedError:  # fairseq's base (or a wrapper over it): read the size arrays below
        sizes = getattr(dataset, "sizes", None)
    if isinstance(sizes, np.ndarray):
        return sizes[indices]
    if isinstance(sizes, (list, tuple)) and sizes and all(isinstance(x, np.ndarray) for x in sizes):
        return np.max(np.stack([x[indices] for x in sizes]), axis=0)
    return np.array([dataset.num_tokens(int(i)) for i in indices])


def is_set(cfg, name) -> bool:
    """A field that holds a value (not missing, not an interpolation left unresolved)."""
    try:
        value = getattr(cfg, name, None)
    except Exception:  # an interpolation omegaconf cannot resolve outside a full fairseq config
        return False
    return isinstance(value, str) and bool(value) and not value.startswith("${")
