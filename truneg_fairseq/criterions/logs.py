"""The one helper every criterion's ``reduce_metrics`` uses: a logged value summed over the
logging outputs of a step's workers and micro-batches (fairseq passes them as a list)."""

from fairseq import utils


def total(logging_outputs, key: str):
    """Sum of ``key`` over ``logging_outputs`` (0 where a worker did not log it), a Python number."""
    return utils.item(sum(log.get(key, 0) for log in logging_outputs))
