"""fairseq's sentence_prediction fine-tuning on the two-class set of
``corpus_fixtures.make_classification_data``: the flags after a tiny model's."""

from typing import List, Optional, Sequence

# a fine-tuning run restored from a pre-trained checkpoint starts its own optimizer and schedule
RESET = ["--reset-optimizer", "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"]


def sentence_prediction_args(
    model: Sequence[str],
    max_update: Optional[int] = None,
    restore=None,
    best_accuracy: bool = False,
) -> List[str]:
    """``model`` (the model's flags, without ``--tokens-per-sample``, a masked_lm flag) then the
    sentence_prediction task and criterion on two classes, ``--max-positions 64`` unless
    ``model`` sets it; ``restore``: the checkpoint to start from, with :data:`RESET`;
    ``best_accuracy``: the best checkpoint is the one of the highest validation accuracy."""
    args = [
        *model,
        "--task",
        "sentence_prediction",
        "--criterion",
        "sentence_prediction",
        "--num-classes",
        "2",
        "--init-token",
        "0",
        "--separator-token",
        "2",
    ]
    if "--max-positions" not in model:
        args += ["--max-positions", "64"]
    if restore is not None:
        args += ["--restore-file", str(restore), *RESET]
    if max_update is not None:
        args += ["--max-update", str(max_update)]
    if best_accuracy:
        args += ["--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric"]
    return args
