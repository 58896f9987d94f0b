"""Evaluate a masked-LM checkpoint: MLM loss, accuracy and the false-negative statistics.

Works for any fairseq ``masked_lm`` checkpoint (a plain ``masked_lm`` baseline included), so the
statistics of the paper's Table 2 can be compared across criterions on the same masked data: the
masking is seeded, so every checkpoint sees identical masks. Both paths (binarized data, raw
text) score through :class:`truneg_fairseq.pipelines.scorer.MaskedLMScorer`, the criterions'
own accounting (:mod:`truneg_fairseq.evaluation.false_negatives` defines every number).
"""

import json
import logging
import os
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch
from fairseq import utils

from truneg_fairseq.checkpoints import CheckpointError
from truneg_fairseq.pipelines.scorer import MaskedLMScorer, Scored, masked_samples

logger = logging.getLogger(__name__)

# --long-lines: what happens to blocks longer than the model's positions
LONG_LINES = ("skip", "break")


def check_split(data: str, subset: str) -> None:
    """:class:`CheckpointError` naming ``data`` when it holds no binarized ``subset``: a model
    directory written by ``convert_hf.py import`` (dict.txt, model.pt, no data) is said to be one."""
    from fairseq.data import indexed_dataset

    first = str(data).split(os.pathsep)[0]  # the split of epoch 1, as the task loads it
    if indexed_dataset.infer_dataset_impl(os.path.join(first, subset)) is not None:
        return
    if os.path.isfile(os.path.join(first, "import.json")) or os.path.isfile(
        os.path.join(first, "model.pt")
    ):
        raise CheckpointError(
            f"--data {data} is a model directory written by convert_hf.py import (model.pt, dict.txt), not a "
            f"data-bin: binarize text with its vocabulary (python scripts/prepare_corpus.py --input TEXT "
            f"--output-dir OUT --tokenizer wordpiece --vocab {first}/vocab.txt --srcdict {first}/dict.txt) and "
            "give --data OUT/data-bin, or evaluate raw text with --text FILE"
        )
    found = sorted(n[:-4] for n in os.listdir(first) if n.endswith(".idx"))
    raise CheckpointError(
        f"--data {data} has no binarized split '{subset}' ({subset}.bin/{subset}.idx; found: "
        f"{', '.join(found) or 'none'}): pick one with --subset, or binarize the text with "
        "scripts/prepare_corpus.py"
    )


def evaluate_mlm(
    checkpoint: str,
    data: str,
    synonym_table: Optional[str] = None,
    subset: str = "valid",
    batch_size: int = 32,
    max_batches: int = 0,
    seed: int = 1,
    long_lines: str = "skip",
    show: int = 0,
    cases: Optional[list] = None,
    device: str = "cpu",
) -> Scored:
    """The counts (:class:`~truneg_fairseq.evaluation.false_negatives.Counts`; ``.report`` gives
    the values) of ``checkpoint`` on binarized ``subset`` of ``data``, masked by the
    checkpoint's own task with ``seed``: the samples a valid pass of that training sees, every
    sequence scored. The blocks are the checkpoint's task's (its ``--tokens-per-sample`` and
    ``--sample-break-mode``); ``long_lines`` decides what happens to blocks longer than the
    model's positions: ``skip`` leaves them out (counted in the log), ``break`` cuts the split
    into blocks of at most that many tokens (break mode ``none``). ``show`` > 0 (with a
    ``synonym_table``): up to that many Figure-3 cases, one per distinct gold/prediction pair,
    also appended to ``cases``."""
    from truneg_fairseq.checkpoints import load_for_inference

    if long_lines not in LONG_LINES:
        raise ValueError(f"long_lines must be one of {', '.join(LONG_LINES)}, got {long_lines!r}")
    models, cfg, task = load_for_inference(checkpoint, data, {"seed": seed})
    model = models[0].eval()
    check_split(cfg.task.data, subset)
    scorer = MaskedLMScorer(model, task, cfg.model._name, synonym_table, device)
    positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    dataset = _load_split(task, subset, positions, long_lines, checkpoint)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_sentences=batch_size,
        seed=seed,
        num_workers=0,
        max_positions=positions,
        ignore_invalid_inputs=True,
    ).next_epoch_itr(shuffle=False)
    scored = scorer.score(itr, show, max_batches=max_batches)
    if cases is not None:
        cases += scored.cases
    logger.info(
        f"{checkpoint}: scored {scored.counts.sequences} sequences of {subset}, "
        f"{scored.counts.masked} masked words ({scored.counts.special_masked} masked special entries)"
    )
    return scored


def _load_split(task, subset: str, positions: int, long_lines: str, checkpoint: str):
    """``subset`` as the checkpoint's task builds it, its over-long blocks cut (``break``) or
    counted in the log and left to the batch iterator to skip (``skip``; all of them over-long is
    a :class:`CheckpointError`)."""
    from omegaconf import open_dict

    if long_lines == "break":
        with open_dict(task.cfg):
            task.cfg.sample_break_mode = "none"
            task.cfg.tokens_per_sample = positions
        logger.info(f"{subset}: cut into blocks of at most {positions} tokens (--long-lines break)")
    task.load_dataset(subset, combine=False, epoch=1)
    dataset = task.dataset(subset)
    _, too_long = dataset.filter_indices_by_size(np.arange(len(dataset)), positions)
    if len(dataset) and len(too_long) == len(dataset):
        raise CheckpointError(
            f"every block of {subset} ({len(dataset)}) is longer than the {positions} tokens {checkpoint} takes: "
            "cut them with --long-lines break"
        )
    if len(too_long):
        logger.info(
            f"left out {len(too_long)} of {len(dataset)} blocks longer than {positions} tokens "
            "(--long-lines break cuts them instead)"
        )
    return dataset


# ---------------------------------------------------------------------------------------------
# raw text on an imported (or any WordPiece) model: Table 2's ratios and Figure 3's cases
# ---------------------------------------------------------------------------------------------
def resolve_checkpoint(path) -> str:
    """A checkpoint file, or a directory written by ``convert_hf.py import`` (its model.pt).
    Any other directory is a :class:`CheckpointError` that says what it is: a HuggingFace model
    directory (config.json and weights) gets the import command."""
    from truneg_fairseq.convert.hf_dir import WEIGHT_FILES

    p = Path(path)
    if not p.is_dir():
        return str(p)
    if (p / "model.pt").is_file():
        return str(p / "model.pt")
    if (p / "config.json").is_file() and any((p / name).is_file() for name in WEIGHT_FILES):
        raise CheckpointError(
            f"{path} is a HuggingFace model directory: import it first with python "
            f"scripts/convert_hf.py import {path} OUT_DIR, then evaluate OUT_DIR"
        )
    raise CheckpointError(
        f"checkpoint {path} is a directory without model.pt: give a checkpoint file "
        "(e.g. checkpoint_last.pt) or a directory written by scripts/convert_hf.py import"
    )


def _text_sequences(text, encode, d, max_len: int, max_lines: int) -> List[torch.Tensor]:
    """One sequence per non-empty line: <s> entries </s>, cut to ``max_len`` ids (counted in the log)."""
    seqs = []
    cut = 0
    with open(text, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            ids = [d.index(t) for t in encode(line.strip())]
            cut += len(ids) > max_len - 2
            ids = ids[: max_len - 2]
            if ids:
                seqs.append(torch.tensor([d.bos()] + ids + [d.eos()]))
            if max_lines and len(seqs) >= max_lines:
                break
    if cut:
        logger.info(
            f"cut {cut} of {len(seqs)} lines of {text} to {max_len} ids (<s> and </s> included)"
        )
    return seqs


def _text_tokenizer(checkpoint: str, tokenizer, vocab: Optional[str], lowercase: Optional[bool]):
    """(text -> dict.txt symbols, symbols -> text) for raw-text evaluation: ``tokenizer``'s, else
    WordPiece over ``vocab`` or the vocab.txt beside the checkpoint, lower-cased as given, as the
    import recorded, or (neither) lower-cased."""
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer, join_wordpieces

    if tokenizer is not None:
        return tokenizer.pieces, " ".join
    vocab = Path(vocab) if vocab else Path(checkpoint).parent / "vocab.txt"
    if not vocab.is_file():
        raise CheckpointError(
            f"no WordPiece vocabulary {vocab}: give the import's vocab.txt with --vocab"
        )
    if lowercase is None:
        info = Path(checkpoint).parent / "import.json"
        recorded = json.loads(info.read_text()).get("lowercase") if info.is_file() else None
        lowercase = True if recorded is None else bool(recorded)
    return build_tokenizer(
        TokenizerSpec("wordpiece", vocab=str(vocab), lowercase=lowercase)
    ).pieces, join_wordpieces


def evaluate_text(
    checkpoint,
    text,
    synonym_table: Optional[str] = None,
    device: str = "cpu",
    batch_size: int = 32,
    max_len: int = 128,
    mask_prob: float = 0.15,
    seed: int = 1,
    max_lines: int = 0,
    show: int = 0,
    vocab: Optional[str] = None,
    lowercase: Optional[bool] = None,
    tokenizer=None,
    cases: Optional[list] = None,
) -> Scored:
    """Mask ``mask_prob`` of the ordinary entries of each line of ``text`` (seeded, all as
    ``<mask>``), predict them with the model's masked-LM network and count as
    :func:`evaluate_mlm` does (one sequence per line; ``.report`` adds ``iter_corr_ratio_512``,
    lines packed into 512-token units). ``show``: up to that many Figure-3 cases, also appended
    to ``cases``. ``tokenizer`` (:mod:`truneg_fairseq.text`): the model's; default WordPiece
    over ``vocab`` or the vocab.txt beside the checkpoint."""
    from truneg_fairseq.checkpoints import load_for_inference

    checkpoint = resolve_checkpoint(checkpoint)
    models, cfg, task = load_for_inference(checkpoint)
    model = models[0]
    d = task.source_dictionary
    encode, join = _text_tokenizer(checkpoint, tokenizer, vocab, lowercase)
    positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    if positions is not None and max_len > positions:
        logger.info(
            f"--max-len {max_len} is more than the {positions} positions of {checkpoint}: lines are cut to "
            f"{positions} ids"
        )
        max_len = positions
    seqs = _text_sequences(text, encode, d, max_len, max_lines)
    if not seqs:
        raise CheckpointError(f"--text {text} has no non-empty lines")
    scorer = MaskedLMScorer(model, task, cfg.model._name, synonym_table, device, join)
    samples = masked_samples(seqs, d, mask_prob, torch.Generator().manual_seed(seed), batch_size)
    scored = scorer.score(samples, show)
    if not scored.counts.masked:
        raise CheckpointError(
            f"no entry of {text} was masked (--mask-prob {mask_prob}): raise --mask-prob or give "
            "more text"
        )
    if cases is not None:
        cases += scored.cases
    return scored
