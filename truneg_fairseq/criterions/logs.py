"""The criterions' statistics through fairseq's meters: the sums of a step's workers and
micro-batches (fairseq passes their logging outputs as a list) reduced by
:mod:`truneg_fairseq.core.statistics`, the one definition of every value, and logged with the
weights fairseq averages them by over an interval."""

from typing import Sequence

from fairseq import utils
from fairseq.logging import metrics

from truneg_fairseq.core import statistics as st


def total(logging_outputs, key: str):
    """Sum of ``key`` over ``logging_outputs`` (0 where a worker did not log it), a Python number."""
    return utils.item(sum(log.get(key, 0) for log in logging_outputs))


def log_scalars(scalars: Sequence[st.Scalar]) -> None:
    for s in scalars:
        metrics.log_scalar(s.name, s.value, s.weight, round=s.decimals)


def log_loss_terms(logging_outputs, terms) -> float:
    """Log ``loss`` and each of ``terms`` some logging output holds (bits per masked token,
    :func:`truneg_fairseq.core.statistics.loss_scalars`) and ``ppl`` of ``mlm_loss``. Returns the
    summed ``sample_size`` (nothing is logged when it is 0)."""
    summed = st.sum_logs(logging_outputs)
    n = summed.get("sample_size", 0)
    if n == 0:
        return n
    log_scalars(st.loss_scalars(summed, terms))
    metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
    return n


def log_false_negatives(logging_outputs: Sequence[dict]) -> None:
    """Log the ``fn_*`` counts of fairseq logging outputs (summed, hidden ``_fn_*`` meters) and
    the values :func:`~truneg_fairseq.core.statistics.derive` makes of them (derived meters): a
    train interval, an epoch and a valid pass each report the ratios of their own summed counts.
    ``nseq`` (sequences scored) and ``special_masked`` are logged as sums."""
    if not any("fn_masked" in log for log in logging_outputs):
        return
    present = {k for log in logging_outputs for k in log if k.startswith("fn_")}
    for name in st.SUMMED:
        key = f"fn_{name}"
        if key in present:
            metrics.log_scalar_sum(
                f"_{key}", sum(float(log.get(key, 0)) for log in logging_outputs)
            )
    metrics.log_scalar_sum(
        "nseq", sum(float(log.get("fn_sequences", 0)) for log in logging_outputs)
    )
    metrics.log_scalar_sum(
        "special_masked", sum(float(log.get("fn_special_masked", 0)) for log in logging_outputs)
    )
    with_syn, with_content = "fn_synonym" in present, "fn_content" in present

    def report(meters) -> st.Report:
        c = st.Counts(**{n: meters[f"_fn_{n}"].sum for n in st.SUMMED if f"_fn_{n}" in meters})
        c.with_synonyms, c.with_content = with_syn, with_content
        return st.derive(c)

    empty = st.derive(st.Counts(with_synonyms=with_syn, with_content=with_content))
    for key, decimals in st.LOGGED:
        if getattr(empty, key) is None:
            continue
        metrics.log_derived(key, lambda m, key=key, d=decimals: round(getattr(report(m), key), d))
