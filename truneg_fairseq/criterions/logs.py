"""What the criterions' ``reduce_metrics`` share: a logged value summed over the logging outputs
of a step's workers and micro-batches (fairseq passes them as a list), and the logging of the
loss and its terms in fairseq's unit."""

import math

from fairseq import utils
from fairseq.logging import metrics


def total(logging_outputs, key: str):
    """Sum of ``key`` over ``logging_outputs`` (0 where a worker did not log it), a Python number."""
    return utils.item(sum(log.get(key, 0) for log in logging_outputs))


def log_loss_terms(logging_outputs, terms) -> float:
    """Log ``loss`` and each of ``terms`` some logging output holds as its sum / ``sample_size``
    / ln 2 (bits per masked token, fairseq's unit for ``loss``, so the logged loss is the
    weighted sum of the logged terms), and ``ppl`` of ``mlm_loss``. Returns the summed
    ``sample_size`` (nothing is logged when it is 0)."""
    n = total(logging_outputs, "sample_size")
    if n == 0:
        return n
    ln2 = math.log(2)
    metrics.log_scalar("loss", total(logging_outputs, "loss") / n / ln2, n, round=3)
    for term in terms:
        if any(term in log for log in logging_outputs):
            metrics.log_scalar(term, total(logging_outputs, term) / n / ln2, n, round=4)
    metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
    return n
