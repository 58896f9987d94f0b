"""The report in fairseq's log when dynamo gives up recompiling a compiled part of the training
step (``--electra-compile``: the encoder stacks, the model, the whole update;
``--batch-mlm-compile``: the model, the whole update) and runs it eager from then on."""

import logging
from typing import Optional

logger = logging.getLogger(__name__)


class _DynamoFallbackWarning(logging.Handler):
    """Repeats dynamo's "hit config.recompile_limit" warning in fairseq's log as the plugin's
    own: dynamo logs it once to its own logger (which fairseq's log format does not show
    prominently) and from then on runs the function eager, so a compiled run would go on
    uncompiled, and slower, without a word in the training log."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.fallbacks = 0

    def emit(self, record):
        message = record.getMessage()
        if "hit config." not in message or "limit" not in message:
            return
        self.fallbacks += 1
        first = message.splitlines()
        where = next((line.strip() for line in first if line.strip().startswith("function:")), "")
        reason = next(
            (line.strip() for line in first if line.strip().startswith("last reason:")), ""
        )
        logger.warning(
            "--electra-compile/--batch-mlm-compile: torch.compile gave up recompiling (%s; %s "
            "%s) and runs that code eager from now on: the step is no longer compiled. Keep every "
            "batch's shape fixed (--mlm-prediction-slots static, --sample-break-mode none, one "
            "--tokens-per-sample and --batch-size) or drop the compile flag",
            first[0].strip(),
            where,
            reason,
        )


_FALLBACK_WATCH: Optional[_DynamoFallbackWarning] = None


def watch_dynamo_fallback() -> _DynamoFallbackWarning:
    """Install (once per process) the handler of :class:`_DynamoFallbackWarning` on dynamo's
    logger, again where something has taken it off since (a run that restores the loggers it
    found); returns it (its ``fallbacks`` counts the warnings seen)."""
    global _FALLBACK_WATCH
    if _FALLBACK_WATCH is None:
        _FALLBACK_WATCH = _DynamoFallbackWarning()
    dynamo = logging.getLogger("torch._dynamo")
    if _FALLBACK_WATCH not in dynamo.handlers:
        dynamo.addHandler(_FALLBACK_WATCH)
    return _FALLBACK_WATCH
