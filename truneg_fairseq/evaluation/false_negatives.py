"""False negatives in a checkpoint's masked-LM predictions: the paper's Table 2 and Figure 3.

Every checkpoint is scored on the same masked blocks of a binarized split (blocks built as
fairseq's ``masked_lm`` task builds them, masks drawn once with a seeded generator and reused), so
numbers from different criterions and from different points of training are comparable.

For the M masked positions of a batch (gold ``w_k``, prediction ``r_k`` = argmax of the logits):

* ``mlm_loss``       mean -log2 p(w_k) over masked positions (bits, as fairseq logs ``loss``);
* ``mlm_acc``        % of masked positions with ``r_k == w_k``;
* ``syn_acc``        synonym-aware accuracy: % with ``r_k == w_k`` or ``r_k`` a synonym of ``w_k``;
* ``pred_corr_ratio``  prediction level: synonym predictions / mispredicted positions (%);
* ``iter_corr_ratio``  iteration level: blocks with >= 1 synonym prediction / blocks with >= 1
                     masked position (%);
* ``content_pred``   % of predictions that are content words (alphabetic, not a stopword): a
                     model still in the unigram plateau predicts separators and stopwords only.

A synonym prediction is one that the hard correction (Eq. 2) would leave out of the loss: a pair of
the synonym table, a gold entry that ends its word (subword pieces are never corrected) and a
prediction that differs from the gold. The statistics are pure functions over tensors
(:func:`synonym_predictions`, :func:`position_counts`, :func:`derive`, :func:`pick_cases`); the
model is reached through :func:`masked_logits` only.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

COUNT_KEYS = ("masked", "correct", "wrong", "synonym", "blocks", "blocks_synonym", "nll", "content_pred")


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
def masked_logits(model, src_tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Masked-LM logits at the masked positions: src_tokens B x T, masked B x T bool -> M x V
    (rows in the order of ``src_tokens[masked]``). fairseq's RoBERTa, the plugin's RoBERTa and
    BERT, and the plugin's ELECTRA (its generator) all answer ``model(src_tokens,
    masked_tokens=...)`` with (logits, extra); any other model (a fine-tuned one) is a
    ``TypeError`` that says so."""
    from fairseq.models.roberta import RobertaModel

    from truneg_fairseq.models.objectives import MaskedLMObjectives

    if not isinstance(model, (MaskedLMObjectives, RobertaModel)):
        raise TypeError(f"{type(model).__name__} is not a masked-LM model (RoBERTa, BERT or ELECTRA): evaluate a "
                        "pre-training checkpoint, not a fine-tuned one")
    return model(src_tokens, masked_tokens=masked)[0]


# ---------------------------------------------------------------------------------------------
# statistics: pure functions over tensors
# ---------------------------------------------------------------------------------------------
def draw_masks(tokens: torch.Tensor, eligible: torch.Tensor, mask_prob: float, generator: torch.Generator) -> torch.Tensor:
    """B x T bool: each eligible position is masked with probability ``mask_prob`` (seeded)."""
    return (torch.rand(tokens.shape, generator=generator) < mask_prob) & eligible


def mask_rows(tokens: torch.Tensor, nspecial: int, mask_idx: int, mask_prob: float, generator: torch.Generator):
    """Draw masks over the ordinary entries of B x T ``tokens`` (not the specials ``<s> <pad> </s>
    <unk>``, not ``<mask>``; :func:`draw_masks`); returns (tokens, selection) of the B' rows that
    hold at least one masked position, each B' x T."""
    eligible = tokens.ge(nspecial) & tokens.ne(mask_idx)
    sel = draw_masks(tokens, eligible, mask_prob, generator)
    rows = sel.any(dim=1)
    return tokens[rows], sel[rows]


def synonym_predictions(gold: torch.Tensor, pred: torch.Tensor, is_pair: torch.Tensor, ends_word: torch.Tensor) -> torch.Tensor:
    """M bool: the predictions hard correction leaves out of the loss. ``is_pair`` (M bool):
    (gold, pred) is a pair of the synonym table; ``ends_word`` (M bool): the gold entry ends its
    word (False for a subword piece followed by a continuation)."""
    return is_pair & ends_word & pred.ne(gold)


def position_counts(
    gold: torch.Tensor, pred: torch.Tensor, nll: torch.Tensor, synonym: torch.Tensor, row: torch.Tensor,
    num_blocks: int, content: torch.Tensor,
) -> Dict[str, float]:
    """Counts of one batch. M-vectors: ``gold``, ``pred`` (ids), ``nll`` (-ln p(gold), nats),
    ``synonym`` (bool, :func:`synonym_predictions`), ``row`` (block index of each position, in
    [0, num_blocks)), ``content`` (bool: the prediction is a content word). ``num_blocks``: blocks
    in the batch that hold at least one masked position. Returns the :data:`COUNT_KEYS` (summable)."""
    per_row = torch.zeros(num_blocks, dtype=torch.long, device=gold.device)
    per_row.index_add_(0, row, synonym.long())
    correct = int(pred.eq(gold).sum())
    return {
        "masked": gold.numel(), "correct": correct, "wrong": gold.numel() - correct,
        "synonym": int(synonym.sum()), "blocks": num_blocks, "blocks_synonym": int(per_row.gt(0).sum()),
        "nll": float(nll.double().sum()), "content_pred": int(content.sum()),
    }


def add_counts(total: Dict[str, float], counts: Dict[str, float]) -> Dict[str, float]:
    for k in COUNT_KEYS:
        total[k] = total.get(k, 0) + counts[k]
    return total


def derive(c: Dict[str, float]) -> Dict[str, float]:
    """Counts -> the reported values (losses in bits, the rest in %)."""
    m = max(c["masked"], 1)
    return {
        "mlm_loss": c["nll"] / m / math.log(2),
        "mlm_acc": 100.0 * c["correct"] / m,
        "syn_acc": 100.0 * (c["correct"] + c["synonym"]) / m,
        "pred_corr_ratio": 100.0 * c["synonym"] / max(c["wrong"], 1),
        "iter_corr_ratio": 100.0 * c["blocks_synonym"] / max(c["blocks"], 1),
        "content_pred": 100.0 * c["content_pred"] / m,
    }


def pick_cases(gold: torch.Tensor, pred: torch.Tensor, synonym: torch.Tensor, k: int, seen: Optional[set] = None) -> List[int]:
    """Indices (into the M positions) of up to ``k`` synonym predictions, one per distinct
    (gold, pred) pair not in ``seen`` (updated), in position order."""
    seen = set() if seen is None else seen
    out = []
    for m in synonym.nonzero()[:, 0].tolist():  # only the synonym positions: a handful per batch
        pair = (int(gold[m]), int(pred[m]))
        if pair in seen:
            continue
        seen.add(pair)
        out.append(m)
        if len(out) == k:
            break
    return out


def sentence_around(block: Sequence[int], col: int, eos: int, skip: Sequence[int]) -> List[int]:
    """Indices of ``block`` that form the sentence holding position ``col``: from after the
    previous ``eos`` to before the next one, leaving out the ids in ``skip`` (<s>, padding)."""
    start = col
    while start > 0 and block[start - 1] != eos:
        start -= 1
    end = col
    while end + 1 < len(block) and block[end] != eos:
        end += 1
    return [i for i in range(start, end + (block[end] != eos)) if block[i] not in skip]


@dataclass
class Case:
    """One Figure-3 case: the sentence with the position shown as [MASK], gold, prediction and the
    gold's synonyms (entries of the dictionary)."""

    sentence: str
    gold: str
    prediction: str
    synonyms: List[str]
    checkpoint: str = ""

    def format(self, number: int) -> str:
        return (f"case {number}: {self.sentence}\n  gold: {self.gold} | prediction: {self.prediction} | "
                f"WordNet synonyms of '{self.gold}' in the vocabulary: {', '.join(self.synonyms)}")


def make_case(d, table, block: Sequence[int], col: int, gold: int, pred: int, join=" ".join) -> Case:
    """The :class:`Case` of masked position ``col`` of ``block`` (the original ids, not the
    masked input): the sentence around it (:func:`sentence_around`) with that position shown as
    [MASK], its other entries as they were, joined by ``join`` (a list of dictionary entries ->
    text); ``d``: the dictionary, ``table``: the synonym table (the gold's synonym list)."""
    idx = sentence_around(block, col, d.eos(), (d.bos(), d.pad()))
    words = ["[MASK]" if i == col else d[block[i]] for i in idx]
    return Case(join(words), d[gold], d[pred], [d[i] for i in table.synonyms_of(gold)])


# ---------------------------------------------------------------------------------------------
# data and checkpoints
# ---------------------------------------------------------------------------------------------
def content_word_mask(symbols: Sequence[str], nspecial: int) -> torch.Tensor:
    """V bool: entries that are content words (alphabetic after a word-start marker is removed,
    not a stopword)."""
    from truneg_fairseq.lexicon.synonyms import stopwords

    stop = stopwords()
    out = torch.zeros(len(symbols), dtype=torch.bool)
    for i, s in enumerate(symbols):
        w = s.lstrip("\u2581\u0120")
        out[i] = i >= nspecial and w.isalpha() and w.lower() not in stop
    return out


def load_blocks(data_bin: str, dictionary, subset: str = "valid", tokens_per_sample: int = 128,
                break_mode: str = "complete") -> List[torch.Tensor]:
    """The blocks of ``subset`` exactly as fairseq's ``masked_lm`` task feeds them: token blocks of
    at most ``tokens_per_sample - 1`` ids (``--sample-break-mode``), ``<s>`` prepended."""
    from fairseq.data import PrependTokenDataset, TokenBlockDataset, data_utils

    path = os.path.join(data_bin, subset)
    ds = data_utils.load_indexed_dataset(path, dictionary)
    if ds is None:
        raise FileNotFoundError(f"no binarized split {path}.bin/.idx: run scripts/prepare_corpus.py first")
    ds = TokenBlockDataset(ds, ds.sizes, tokens_per_sample - 1, pad=dictionary.pad(), eos=dictionary.eos(),
                           break_mode=break_mode)
    ds = PrependTokenDataset(ds, dictionary.bos())
    return [ds[i] for i in range(len(ds))]


class CheckpointScorer:
    """Scores checkpoints on one fixed set of masked blocks of a split (see the module doc)."""

    def __init__(self, data_bin: str, synonym_table: str, subset: str = "valid", tokens_per_sample: int = 128,
                 break_mode: str = "complete", mask_prob: float = 0.15, seed: int = 1, batch_size: int = 64,
                 max_blocks: int = 0, device: str = "cpu", passes: int = 1):
        from fairseq.data import Dictionary

        from truneg_fairseq.lexicon.lookup import SynonymLookup
        from truneg_fairseq.lexicon.synonyms import SynonymTable

        self.data_bin = data_bin
        self.device = torch.device(device)
        self.d = Dictionary.load(os.path.join(data_bin, "dict.txt"))
        self.table = SynonymTable.load(synonym_table)
        self.table.check_dictionary(self.d.symbols, synonym_table)
        mask_idx = self.d.add_symbol("<mask>")  # as fairseq's masked_lm and the electra task do
        self.lookup = SynonymLookup(self.table, len(self.d)).to(self.device)
        self.content = content_word_mask(self.d.symbols, self.d.nspecial).to(self.device)
        blocks = load_blocks(data_bin, self.d, subset, tokens_per_sample, break_mode)
        if max_blocks:
            blocks = blocks[:max_blocks]
        gen = torch.Generator().manual_seed(seed)
        self.batches = []  # (tokens B x T, masked B x T) with every row holding >= 1 masked position
        # ``passes`` independent mask draws over the blocks: more masked positions from a small split
        for start in [s for _ in range(passes) for s in range(0, len(blocks), batch_size)]:
            from fairseq.data import data_utils

            tokens = data_utils.collate_tokens(blocks[start:start + batch_size], self.d.pad())  # B x T
            tokens, sel = mask_rows(tokens, self.d.nspecial, mask_idx, mask_prob, gen)
            if len(tokens):  # masks drawn on the CPU: the same on every device
                self.batches.append((tokens.to(self.device), sel.to(self.device)))
        self.mask_idx = mask_idx

    @torch.no_grad()
    def score_model(self, model, num_cases: int = 0, seen: Optional[set] = None):
        """(counts, cases) of ``model`` on the fixed masked blocks."""
        model.eval().to(self.device)
        total: Dict[str, float] = {}
        cases: List[Case] = []
        seen = set() if seen is None else seen
        for tokens, sel in self.batches:
            src = tokens.masked_fill(sel, self.mask_idx)  # B x T
            logits = masked_logits(model, src, sel).float()  # M x V
            gold = tokens[sel]  # M
            nll = F.cross_entropy(logits, gold, reduction="none")  # M (nats)
            pred = logits.argmax(dim=-1)  # M
            where = sel.nonzero()  # M x 2 (row, column), the order of tokens[sel]
            synonym = synonym_predictions(gold, pred, self.lookup.is_synonym(gold, pred),
                                          self.lookup.ends_word(tokens)[sel])
            add_counts(total, position_counts(gold, pred, nll, synonym, where[:, 0], tokens.size(0),
                                              self.content[pred]))
            for m in pick_cases(gold, pred, synonym, num_cases - len(cases), seen) if len(cases) < num_cases else []:
                row, col = where[m].tolist()
                cases.append(self.case(tokens[row].tolist(), col, int(gold[m]), int(pred[m])))
        return total, cases

    def case(self, block: List[int], col: int, gold: int, pred: int) -> Case:
        return make_case(self.d, self.table, block, col, gold, pred)

    def score_checkpoint(self, checkpoint: str, num_cases: int = 0, seen: Optional[set] = None):
        """(counts, cases) of a fairseq checkpoint (RoBERTa ``masked_lm`` or the plugin's ELECTRA)."""
        model = load_model(checkpoint, self.data_bin)
        counts, cases = self.score_model(model, num_cases, seen)
        for c in cases:
            c.checkpoint = checkpoint
        return counts, cases


def load_model(checkpoint: str, data_bin: str):
    """The model of a fairseq checkpoint, on the CPU in eval mode, with ``data_bin``'s dictionary."""
    from truneg_fairseq.checkpoints import load_for_inference

    models, _, _ = load_for_inference(checkpoint, data_bin)
    return models[0].eval()


_INTERVAL = re.compile(r"checkpoint_(\d+)_(\d+)\.pt$")


def interval_checkpoints(save_dir: str) -> Dict[int, str]:
    """{num_updates: path} of the ``checkpoint_<epoch>_<updates>.pt`` files that
    ``--save-interval-updates`` writes."""
    out = {}
    for name in os.listdir(save_dir):
        m = _INTERVAL.match(name)
        if m:
            out[int(m.group(2))] = os.path.join(save_dir, name)
    return dict(sorted(out.items()))
