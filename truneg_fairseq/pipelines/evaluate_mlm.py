"""Evaluate a masked-LM checkpoint: MLM loss, accuracy and the false-negative statistics.

Works for any fairseq ``masked_lm`` checkpoint (a plain ``masked_lm`` baseline included), so the
statistics of the paper's Table 2 can be compared across criterions on the same masked data: the
masking is seeded, so every checkpoint sees identical masks. Both paths (binarized data, raw
text) score through :class:`truneg_fairseq.pipelines.scorer.MaskedLMScorer`, the criterions'
own accounting (:mod:`truneg_fairseq.evaluation.false_negatives` defines every number).
"""

import itertools
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch
from fairseq import utils

from truneg_fairseq.checkpoints import CheckpointError
from truneg_fairseq.errors import CorpusError
from truneg_fairseq.evaluation.columns import SCORE_COLUMNS
from truneg_fairseq.pipelines.scorer import MaskedLMScorer, Progress, Scored, masked_samples
from truneg_fairseq.text import read_lines

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


@dataclass
class EvalConfig:
    """How ``evaluate_mlm.py`` scores (its flags). Fields marked --data or --text apply to that
    mode only."""

    synonym_table: Optional[str] = None  # None: loss and accuracy only
    device: str = "cpu"
    batch_size: int = 32
    seed: int = 1  # masking seed, the same for every checkpoint
    show: int = 0  # Figure-3 cases per checkpoint (needs a synonym table)
    progress_seconds: float = 10.0  # a progress line at most this often while scoring
    # ids per block (--data) or per line (--text) for every checkpoint; None: the checkpoint's
    # own (one checkpoint) or the smallest max positions of all (several: :func:`compare`)
    block_size: Optional[int] = None
    subset: str = "valid"  # --data
    max_batches: int = 0  # --data; 0: the whole split
    long_lines: str = "skip"  # --data: skip or break blocks longer than the block size
    max_len: int = 128  # --text: ids per line (longer lines are cut)
    mask_prob: float = 0.15  # --text
    max_lines: int = 0  # --text; 0: every line
    vocab: Optional[str] = None  # --text: WordPiece vocab.txt (default: beside the checkpoint)
    lowercase: Optional[bool] = None  # --text: None: as the import recorded it, else lower-cased


def _config(config: Optional[EvalConfig], synonym_table: Optional[str], fields: dict):
    cfg = replace(config or EvalConfig(), **fields)
    if synonym_table is not None:
        cfg = replace(cfg, synonym_table=synonym_table)
    if cfg.long_lines not in LONG_LINES:
        raise ValueError(
            f"long_lines must be one of {', '.join(LONG_LINES)}, got {cfg.long_lines!r}"
        )
    return cfg


def evaluate_mlm(
    checkpoint: str,
    data: str,
    synonym_table: Optional[str] = None,
    config: Optional[EvalConfig] = None,
    cases: Optional[list] = None,
    **fields,
) -> Scored:
    """The counts (:class:`~truneg_fairseq.evaluation.false_negatives.Counts`; ``.report`` gives
    the values) of ``checkpoint`` on binarized ``config.subset`` of ``data``, masked by the
    checkpoint's own task with ``config.seed``: the samples a valid pass of that training sees,
    every sequence scored. The blocks are the checkpoint's task's (its ``--tokens-per-sample``
    and ``--sample-break-mode``, the first at most ``config.block_size``); ``long_lines``
    decides what happens to blocks longer than the model's positions: ``skip`` leaves them out
    (counted in the log), ``break`` cuts the split into blocks of at most that many tokens
    (break mode ``none``). ``show`` > 0 (with a synonym table): up to that many Figure-3
    cases, one per distinct gold/prediction pair, also appended to ``cases``. ``config``
    (:class:`EvalConfig`), its fields also accepted one by one as keywords."""
    cfg = _config(config, synonym_table, fields)
    scored = _score_data([checkpoint], data, cfg)[0]
    if cases is not None:
        cases += scored.cases
    return scored


def _score_data(checkpoints: Sequence[str], data: str, cfg: EvalConfig) -> List[Scored]:
    """Every checkpoint on the same samples: those the first checkpoint's task builds and masks
    (blocks of at most ``cfg.block_size`` tokens where given), drawn once."""
    from truneg_fairseq.checkpoints import load_for_inference

    out: List[Scored] = []
    samples = None
    for checkpoint in checkpoints:
        models, mcfg, task = load_for_inference(checkpoint, data, {"seed": cfg.seed})
        model = models[0].eval()
        if samples is None:
            check_split(mcfg.task.data, cfg.subset)
            positions = utils.resolve_max_positions(
                task.max_positions(), model.max_positions(), cfg.block_size
            )
            samples = _data_samples(task, positions, cfg, checkpoint, several=len(checkpoints) > 1)
        scorer = MaskedLMScorer(model, task, mcfg.model._name, cfg.synonym_table, cfg.device)
        progress = Progress(f"scoring {checkpoint}", cfg.progress_seconds)
        max_batches = 0 if isinstance(samples, list) else cfg.max_batches
        scored = scorer.score(samples, cfg.show, max_batches=max_batches, progress=progress)
        logger.info(
            f"{checkpoint}: scored {scored.counts.sequences} sequences of {cfg.subset}, "
            f"{scored.counts.masked} masked words ({scored.counts.special_masked} masked special "
            "entries)"
        )
        out.append(scored)
        del models, model, scorer
    return out


def _data_samples(task, positions: int, cfg: EvalConfig, checkpoint: str, several: bool):
    """The batches of ``cfg.subset`` as ``task`` builds and masks them with ``cfg.seed``, blocks
    of at most ``positions`` tokens: an iterator (one checkpoint) or, for several, a list held
    so that each checkpoint gets exactly the same masks."""
    from omegaconf import open_dict

    if (task.cfg.get("tokens_per_sample", None) or positions) > positions:
        with open_dict(task.cfg):
            task.cfg.tokens_per_sample = positions
    dataset = _load_split(task, cfg.subset, positions, cfg.long_lines, checkpoint)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_sentences=cfg.batch_size,
        seed=cfg.seed,
        num_workers=0,
        max_positions=positions,
        ignore_invalid_inputs=True,
    ).next_epoch_itr(shuffle=False)
    if not several:
        return itr
    return list(itertools.islice(itr, cfg.max_batches or None))


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
    seqs, cut = [], 0
    try:
        for line in read_lines(text):
            if not line.strip():
                continue
            ids = [d.index(t) for t in encode(line.strip())]
            cut += len(ids) > max_len - 2
            ids = ids[: max_len - 2]
            if ids:
                seqs.append(torch.tensor([d.bos()] + ids + [d.eos()]))
            if max_lines and len(seqs) >= max_lines:
                break
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"--text {text}, line {getattr(e, 'lineno', '?')}: not UTF-8 ({e.reason}); convert the "
            "file to UTF-8 first (e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8)"
        ) from None
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
    config: Optional[EvalConfig] = None,
    tokenizer=None,
    cases: Optional[list] = None,
    **fields,
) -> Scored:
    """Mask ``config.mask_prob`` of the ordinary entries of each line of ``text`` (seeded, all
    as ``<mask>``), predict them with the model's masked-LM network and count as
    :func:`evaluate_mlm` does (one sequence per line, cut to ``max_len`` ids, the model's
    positions and ``block_size``; ``.report`` adds ``iter_corr_ratio_512``, lines packed into
    512-token units). ``show``: up to that many Figure-3 cases, also appended to ``cases``.
    ``tokenizer`` (:mod:`truneg_fairseq.text`): the model's; default WordPiece over ``vocab``
    or the vocab.txt beside the checkpoint. ``config`` (:class:`EvalConfig`), its fields also
    accepted one by one as keywords."""
    from truneg_fairseq.checkpoints import load_for_inference

    cfg = _config(config, synonym_table, fields)
    checkpoint = resolve_checkpoint(checkpoint)
    models, mcfg, task = load_for_inference(checkpoint)
    model = models[0]
    d = task.source_dictionary
    encode, join = _text_tokenizer(checkpoint, tokenizer, cfg.vocab, cfg.lowercase)
    max_len = min(cfg.max_len, cfg.block_size or cfg.max_len)
    positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    if positions is not None and max_len > positions:
        logger.info(
            f"--max-len {max_len} is more than the {positions} positions of {checkpoint}: lines "
            f"are cut to {positions} ids"
        )
        max_len = positions
    seqs = _text_sequences(text, encode, d, max_len, cfg.max_lines)
    if not seqs:
        raise CheckpointError(f"--text {text} has no non-empty lines")
    scorer = MaskedLMScorer(model, task, mcfg.model._name, cfg.synonym_table, cfg.device, join)
    gen = torch.Generator().manual_seed(cfg.seed)
    samples = masked_samples(seqs, d, cfg.mask_prob, gen, cfg.batch_size)
    progress = Progress(f"scoring {checkpoint}", cfg.progress_seconds)
    scored = scorer.score(samples, cfg.show, progress=progress)
    if not scored.counts.masked:
        raise CheckpointError(
            f"no entry of {text} was masked (--mask-prob {cfg.mask_prob}): raise --mask-prob or "
            "give more text"
        )
    if cases is not None:
        cases += scored.cases
    return scored


# ---------------------------------------------------------------------------------------------
# several checkpoints side by side: one block size, the same masks, one table
# ---------------------------------------------------------------------------------------------
# the table's columns: (report key, header, format)
TABLE_COLUMNS = (
    [("mlm_loss", "loss (bits)", "{:.3f}")]
    + SCORE_COLUMNS
    + [("masked", "masked", "{}"), ("sequences", "sequences", "{}")]
)


@dataclass
class Comparison:
    """What :func:`compare` gives: one :class:`Scored` per checkpoint (in the order given) and
    what they were scored on."""

    checkpoints: List[str]
    scored: List[Scored]
    mode: str  # "data" or "text"
    source: str  # the data-bin (and subset) or the text file
    block_size: Optional[int]  # ids per block / line for every checkpoint (None: its own)
    block_from: Optional[str]  # the checkpoint whose max positions set block_size
    seed: int

    def rows(self) -> List[List[str]]:
        """Header, then one row per checkpoint (a value a report lacks: "-")."""
        out = [["checkpoint"] + [h for _, h, _ in TABLE_COLUMNS]]
        for ck, sc in zip(self.checkpoints, self.scored):
            r = sc.report
            out.append(
                [ck]
                + [
                    "-" if getattr(r, k) is None else fmt.format(getattr(r, k))
                    for k, _, fmt in TABLE_COLUMNS
                ]
            )
        return out

    def describe(self) -> str:
        """One line: what every checkpoint was scored on."""
        n = len(self.checkpoints)
        what = "checkpoint" if n == 1 else f"{n} checkpoints, the same masks for each"
        block = (
            f"blocks of at most {self.block_size} tokens (the smallest max positions: "
            f"{self.block_from})"
            if self.block_from
            else "each checkpoint's own block size"
        )
        return f"{what}: {self.mode} {self.source}, {block}, masking seed {self.seed}"

    def as_json(self) -> dict:
        return {
            "mode": self.mode,
            "source": self.source,
            "block_size": self.block_size,
            "block_from": self.block_from,
            "seed": self.seed,
            "rows": [
                {"checkpoint": ck, **sc.report.as_dict(), "counts": sc.counts.as_dict()}
                for ck, sc in zip(self.checkpoints, self.scored)
            ],
        }

    def markdown(self) -> str:
        from truneg_fairseq.pipelines.study.report import markdown_rows

        return f"{self.describe()}\n\n{markdown_rows(self.rows())}\n"

    def text(self) -> str:
        from truneg_fairseq.pipelines.study.report import format_rows

        return f"{self.describe()}\n\n{format_rows(self.rows())}"


def common_block_size(checkpoints: Sequence[str], data: Optional[str], cfg: EvalConfig):
    """(ids per block, the checkpoint that sets it): the smallest max positions among
    ``checkpoints`` (each loaded once to read them; with --text at most ``cfg.max_len``)."""
    from truneg_fairseq.checkpoints import load_for_inference

    sizes = []
    for ck in checkpoints:
        models, _, task = load_for_inference(ck, data) if data else load_for_inference(ck)
        sizes.append(
            (utils.resolve_max_positions(task.max_positions(), models[0].max_positions()), ck)
        )
        del models, task
    size, of = min(sizes, key=lambda s: s[0])
    if data is None and cfg.max_len < size:
        return cfg.max_len, "--max-len"
    return size, of


def compare(
    checkpoints: Sequence[str],
    data: Optional[str] = None,
    text: Optional[str] = None,
    config: Optional[EvalConfig] = None,
    tokenizer=None,
) -> Comparison:
    """Score every checkpoint (files or import directories) on ``data`` (binarized) or ``text``
    (raw lines) with the same masks and, for several, one block size: ``config.block_size`` or
    the smallest max positions among them (logged), so that a row differs from another only by
    its model."""
    cfg = config or EvalConfig()
    paths = [resolve_checkpoint(c) for c in checkpoints]
    block, block_from = cfg.block_size, "--block-size" if cfg.block_size else None
    if len(paths) > 1 and block is None:
        block, block_from = common_block_size(paths, data, cfg)
        logger.info(
            f"every checkpoint is scored on blocks of at most {block} tokens: the smallest max "
            f"positions, {block_from}"
        )
    cfg = replace(cfg, block_size=block)
    if data is not None:
        scored = _score_data(paths, data, cfg)
        source = f"{data} ({cfg.subset})"
    else:
        scored = [evaluate_text(p, text, config=cfg, tokenizer=tokenizer) for p in paths]
        source = str(text)
    return Comparison(
        [str(c) for c in checkpoints],
        scored,
        "data" if data is not None else "text",
        source,
        block,
        block_from,
        cfg.seed,
    )
