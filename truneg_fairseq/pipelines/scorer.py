"""The one scorer of masked-LM checkpoints: ``evaluate_mlm.py`` (binarized data and raw text),
the demo and the study all score through :class:`MaskedLMScorer`.

It runs the plugin's criterion code on fairseq samples (``net_input``, ``target``) exactly as a
valid pass of ``fairseq-train`` or ``fairseq-validate`` does, with the plain masked-LM
objective, and adds up the criterion's counts (:class:`~truneg_fairseq.evaluation.false_negatives.Counts`):
the same masks give the same numbers here and in fairseq's valid log, by construction. Only the
model's masked-LM network is asked (ELECTRA: its generator); no replacement is sampled, so a
score does not depend on a random state.

Where the samples come from is the caller's business: the checkpoint's own task
(``evaluate_mlm.py --data``, masks drawn by the task with its seed), or sequences masked here
with a seeded generator (:func:`masked_samples`: ``--text``, the study's fixed valid blocks).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import torch

from truneg_fairseq.core.model_outputs import MaskedLMOutputs
from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig
from truneg_fairseq.evaluation import false_negatives as fn

logger = logging.getLogger(__name__)


class _Scoring(CounterFalseNegativeLoss):
    """Plain masked-LM (Eq. 1) through the criterions' accounting. The model is asked for its
    masked-LM logits only (``model(src_tokens, masked_tokens=M)``: fairseq's RoBERTa, the
    plugin's RoBERTa and BERT, ELECTRA's generator); the last step is kept for the cases and
    the per-sequence flags."""

    step = None

    def __init__(self, cfg, task):
        super().__init__(cfg, task)
        self.has_discriminator = False  # scoring reads the masked-LM predictions only

    def run_model(self, model, sample, sel):
        logits = model(**sample["net_input"], **sel.forward_kwargs())[0]  # M x V
        return MaskedLMOutputs(logits, logits.detach().argmax(dim=-1))

    def observe(self, step):
        self.step = step


@dataclass
class Scored:
    """What a scoring gives: the summed counts (:func:`~truneg_fairseq.evaluation.false_negatives.derive`
    turns them into the reported values) and up to the asked number of Figure-3 cases."""

    counts: fn.Counts
    cases: List[fn.Case] = field(default_factory=list)

    @property
    def report(self) -> fn.Report:
        return fn.derive(self.counts)


class Progress:
    """Progress lines of a long scoring (logged in fairseq's format by this module's logger):
    ``label: batch i of n, S sequences, M masked words, T s`` at most every ``seconds``
    (0: after every batch), the first after the first batch."""

    def __init__(self, label: str, seconds: float = 10.0):
        self.label, self.seconds = label, seconds
        self.total: Optional[int] = None
        self.t0 = self.last = 0.0

    def start(self, samples, max_batches: int = 0) -> None:
        try:
            self.total = len(samples)
        except TypeError:  # a generator: no count known
            self.total = None
        if max_batches:
            self.total = min(self.total or max_batches, max_batches)
        self.t0 = time.monotonic()
        self.last = None

    def step(self, i: int, counts: fn.Counts) -> None:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.seconds:
            return
        self.last = now
        of = f" of {self.total}" if self.total else ""
        logger.info(
            f"{self.label}: batch {i}{of}, {counts.sequences} sequences, {counts.masked} masked "
            f"words, {now - self.t0:.0f}s"
        )


class MaskedLMScorer:
    """Scores one masked-LM model (from :func:`truneg_fairseq.checkpoints.load_for_inference`)
    on fairseq samples. ``arch``: the checkpoint's ``cfg.model._name``; ``synonym_table``: a
    table of the task's dictionary (None: accuracy and loss only); ``join``: dictionary entries
    -> text for the cases (default: joined by spaces)."""

    def __init__(
        self,
        model,
        task,
        arch: str,
        synonym_table: Optional[str] = None,
        device: str = "cpu",
        join: Callable[[List[str]], str] = " ".join,
    ):
        from truneg_fairseq.checkpoints import CheckpointError

        self.device = torch.device(device)
        self.model = model.eval().to(self.device)
        self.task = task
        self.d = task.source_dictionary
        self.join = join
        try:
            self.crit = _Scoring(
                SynonymCriterionConfig(
                    synonym_table=synonym_table, arch=arch, mlm_prediction_slots="dynamic"
                ),
                task,
            ).to(self.device)
        except ValueError as e:  # not a masked-LM model: the criterion says which models work
            raise CheckpointError(f"cannot score a {arch} model as a masked LM: {e}") from None
        # the table itself (host side) for the cases' synonym lists
        self.table = _load_table(synonym_table, task) if synonym_table else None

    @torch.no_grad()
    def score(
        self,
        samples: Iterable[dict],
        num_cases: int = 0,
        seen: Optional[set] = None,
        max_batches: int = 0,
        progress: Optional["Progress"] = None,
    ) -> Scored:
        """The counts (and cases) of the model on ``samples`` (fairseq samples with ``id``; the
        ids give the corpus order for the 512-token units). ``progress``: a log line in
        fairseq's format every ``progress.seconds`` while the samples last (long inputs)."""
        from fairseq import utils

        if progress is not None:
            progress.start(samples, max_batches)
        counts = fn.Counts()
        cases: List[fn.Case] = []
        seen = set() if seen is None else seen
        flags: List[
            Tuple[int, int, bool, bool]
        ] = []  # (id, length, has a masked word, has a synonym prediction)
        pad = self.d.pad()
        for i, sample in enumerate(samples):
            if max_batches and i >= max_batches:
                break
            if self.device.type == "cuda":
                sample = utils.move_to_cuda(sample, self.device)
            _, _, log = self.crit(self.model, sample)
            counts = counts + fn.Counts.from_logs([log])
            step = self.crit.step
            word = step.valid & fn.ordinary_positions(
                step.gold, self.crit.nspecial, self.crit.mask_idx
            )  # S
            masked_rows = step.sel.rows_any(word).tolist()  # B
            syn_rows = step.sel.rows_any(word & step.synonym).tolist()  # B
            lengths = sample["net_input"]["src_tokens"].ne(pad).sum(dim=1).tolist()  # B
            flags += zip(sample["id"].tolist(), lengths, masked_rows, syn_rows)
            if self.table is not None and len(cases) < num_cases:
                cases += self._cases(step, num_cases - len(cases), seen)
            if progress is not None:
                progress.step(i + 1, counts)
        if counts.with_synonyms and flags:
            flags.sort()
            counts.units, counts.synonym_units = fn.pack_units(*zip(*[f[1:] for f in flags]))
            counts.with_units = True
        return Scored(counts, cases)

    def _cases(self, step, k: int, seen: set) -> List[fn.Case]:
        """Up to ``k`` Figure-3 cases (one per (gold, prediction) pair not in ``seen``) from the
        synonym predictions of a step."""
        original = torch.where(
            step.target.ne(self.d.pad()), step.target, step.src_tokens
        )  # B x T: before masking
        where = step.sel.masked.nonzero()  # S x 2 (row, column), the order of the selection
        pred = step.net.mlm_pred
        out = []
        for m in fn.pick_cases(step.gold, pred, step.synonym, k, seen):
            row, col = where[m].tolist()
            out.append(
                fn.make_case(
                    self.d,
                    self.table,
                    original[row].tolist(),
                    col,
                    int(step.gold[m]),
                    int(pred[m]),
                    self.join,
                )
            )
        return out


def _load_table(path: str, task):
    from truneg_fairseq.criterions.tables import resolve_table_path
    from truneg_fairseq.lexicon.synonyms import SynonymTable

    return SynonymTable.load(resolve_table_path(path, task), len(task.source_dictionary))


def masked_samples(
    seqs: Sequence[torch.Tensor],
    d,
    mask_prob: float,
    generator: torch.Generator,
    batch_size: int,
    first_id: int = 0,
) -> List[dict]:
    """fairseq ``masked_lm``-style samples of ``seqs`` (1-D id tensors, in corpus order) in
    batches of ``batch_size``: ``mask_prob`` of the ordinary entries masked, every one replaced
    by ``<mask>`` (drawn on the CPU with ``generator``: the same masks on every device)."""
    from fairseq.data import data_utils

    mask_idx = d.index("<mask>")
    out = []
    for start in range(0, len(seqs), batch_size):
        tokens = data_utils.collate_tokens(list(seqs[start : start + batch_size]), d.pad())  # B x T
        sel = fn.mask_ordinary(tokens, d.nspecial, mask_idx, mask_prob, generator)  # B x T
        out.append(make_sample(tokens, sel, d, first_id + start))
    return out


def make_sample(tokens: torch.Tensor, sel: torch.Tensor, d, first_id: int = 0) -> dict:
    """The fairseq sample of B x T ``tokens`` with the positions ``sel`` (B x T bool) masked."""
    lengths = tokens.ne(d.pad()).sum(dim=1)
    return {
        "id": torch.arange(first_id, first_id + tokens.size(0)),
        "net_input": {
            "src_tokens": tokens.masked_fill(sel, d.index("<mask>")),
            "src_lengths": lengths,
        },
        "target": tokens.masked_fill(~sel, d.pad()),
        "nsentences": tokens.size(0),
        "ntokens": int(lengths.sum()),
    }


@dataclass
class FixedMaskConfig:
    """How :class:`FixedMaskScorer` builds and masks its blocks, and where it scores."""

    subset: str = "valid"
    tokens_per_sample: int = 128  # block size, <s> included
    break_mode: str = "complete"  # fairseq's --sample-break-mode
    mask_prob: float = 0.15
    seed: int = 1
    batch_size: int = 64
    max_blocks: int = 0  # 0: every block
    device: str = "cpu"
    passes: int = 1  # independent mask draws over the blocks


class FixedMaskScorer:
    """Scores checkpoints on one fixed set of masked blocks of a binarized split: the blocks
    built as fairseq's ``masked_lm`` task builds them (:func:`~truneg_fairseq.evaluation.false_negatives.load_blocks`),
    masks drawn once with a seeded generator (``passes`` independent draws: more masked
    positions from a small split), so numbers from different criterions and from different
    points of training are comparable. ``config`` (:class:`FixedMaskConfig`), its fields also
    accepted one by one as keywords."""

    def __init__(
        self,
        data_bin: str,
        synonym_table: str,
        config: Optional[FixedMaskConfig] = None,
        **fields,
    ):
        from fairseq.data import Dictionary

        cfg = replace(config or FixedMaskConfig(), **fields)
        self.config = cfg
        self.data_bin, self.synonym_table, self.device = data_bin, synonym_table, cfg.device
        d = Dictionary.load(os.path.join(data_bin, "dict.txt"))
        d.add_symbol("<mask>")  # as fairseq's masked_lm and the electra task do
        blocks = fn.load_blocks(data_bin, d, cfg.subset, cfg.tokens_per_sample, cfg.break_mode)
        if cfg.max_blocks:
            blocks = blocks[: cfg.max_blocks]
        gen = torch.Generator().manual_seed(cfg.seed)
        self.samples: List[dict] = []
        for p in range(cfg.passes):
            self.samples += masked_samples(
                blocks, d, cfg.mask_prob, gen, cfg.batch_size, first_id=p * len(blocks)
            )

    def score_checkpoint(
        self, checkpoint: str, num_cases: int = 0, seen: Optional[set] = None
    ) -> Scored:
        """The counts and cases of a fairseq checkpoint (RoBERTa ``masked_lm`` or the plugin's ELECTRA)."""
        from truneg_fairseq.checkpoints import load_for_inference

        models, cfg, task = load_for_inference(checkpoint, self.data_bin)
        scored = MaskedLMScorer(
            models[0], task, cfg.model._name, self.synonym_table, self.device
        ).score(self.samples, num_cases, seen)
        for c in scored.cases:
            c.checkpoint = checkpoint
        return scored
