"""A masked-LM data collator for any HuggingFace tokenizer with a mask token.

The masking is the package's batch masking (:func:`truneg_fairseq.core.masking.mask_rows`),
the one used by ``--task masked_lm`` and ``--task electra`` of the fairseq plugin: of each row's
``n`` candidate tokens (every token but padding and the tokenizer's special tokens), exactly
``int(mask_prob * n + u)`` are selected (``u`` uniform: probabilistic rounding); of those
``leave_unmasked_prob`` keep their token, ``random_token_prob`` get a random ordinary token, the
rest become the mask token (BERT's 80/10/10 by default). Every draw is a function of (seed, epoch,
example index, position), so an example is masked alike whatever batch, process or resumed run it
lands in: two processes and one process with gradient accumulation see the same masks.

Static prediction slots (google-research/electra's layout, the plugin's ``--mlm-prediction-slots
static``): ``mlm_positions`` (B x N) lists each row's selected positions first, in order; N comes
from the batch shape alone (:func:`truneg_fairseq.core.selection.static_slot_count`), so the
training step has no data-dependent shape and no host-device sync.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from truneg_fairseq.core.masking import mask_rows
from truneg_fairseq.core.selection import static_slot_count
from truneg_fairseq.errors import (
    TokenizerWithoutMaskError,  # noqa: F401  (defined in the one place of the errors)
)
from truneg_fairseq.hf.sharding import PADDING_ONLY, PADDING_ROW

IGNORE = -100  # HF's label for "no target here" (what Trainer counts as not an item)


def check_tokenizer(tokenizer, what: str = "the tokenizer") -> None:
    """Refuse a tokenizer without a mask token or a padding token, naming the fix."""
    if getattr(tokenizer, "mask_token_id", None) is None:
        raise TokenizerWithoutMaskError(
            f"{what} ({type(tokenizer).__name__}) has no mask token: masked-LM training needs one. "
            "Use the tokenizer of a masked-LM model (BERT, RoBERTa, ELECTRA), or add one with "
            "tokenizer.add_special_tokens({'mask_token': '[MASK]'}) and resize the model's "
            "embeddings (model.resize_token_embeddings(len(tokenizer)))"
        )
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise TokenizerWithoutMaskError(
            f"{what} ({type(tokenizer).__name__}) has no padding token: set tokenizer.pad_token"
        )


class MaskedLMCollator:
    """``collator(features) -> batch`` for ``Trainer``/``DataLoader``.

    features: dicts with ``input_ids`` (a list or 1-D tensor of ids, special tokens included) and
    optionally ``index`` (the example's index in the data set: it and the epoch decide its mask;
    without it, batches are numbered in call order) and ``epoch`` (default: the collator's own,
    which :class:`~truneg_fairseq.hf.TrueNegativeTrainer` sets at every epoch's start). A feature
    tokenized with its own ``attention_mask`` (``padding="max_length"``, run_mlm's
    ``--pad_to_max_length``, left padding), ``token_type_ids`` or ``special_tokens_mask`` keeps
    them: its mask decides which positions are attended and candidates, its token types pass
    through, and its special positions are never selected. A feature
    marked ``padding_row`` (a repeat that only fills a process's last batch,
    :mod:`truneg_fairseq.hf.sharding`) is left out; a batch of such rows only gives one row
    without labels and ``padding_only=True`` (the trainer weighs it 0).

    The batch (T the longest row, rounded up to ``pad_to_multiple_of``):

    * ``input_ids`` B x T: the masked input; ``attention_mask`` B x T (1 where attended);
    * ``token_type_ids`` B x T when the features have them (padding: the tokenizer's pad type);
    * ``labels`` B x T: the original token at every selected position, -100 elsewhere (HF's
      convention; ``Trainer`` counts these as the items of the batch);
    * ``mlm_positions`` B x N: the static prediction slots.
    """

    def __init__(
        self,
        tokenizer,
        mask_prob: float = 0.15,
        leave_unmasked_prob: float = 0.1,
        random_token_prob: float = 0.1,
        seed: int = 1,
        max_predictions: Optional[int] = None,
        whole_words: bool = False,
        pad_to_multiple_of: Optional[int] = None,
    ):
        check_tokenizer(tokenizer)
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        if min(leave_unmasked_prob, random_token_prob) < 0 or (
            leave_unmasked_prob + random_token_prob > 1
        ):
            raise ValueError(
                "leave_unmasked_prob and random_token_prob must be >= 0 and sum to at most 1"
            )
        self.tokenizer = tokenizer
        self.mask_prob, self.leave_unmasked_prob = float(mask_prob), float(leave_unmasked_prob)
        self.random_token_prob = float(random_token_prob)
        self.seed, self.epoch, self.max_predictions = int(seed), 0, max_predictions
        self.pad_to_multiple_of = pad_to_multiple_of
        self.pad, self.mask_idx = tokenizer.pad_token_id, tokenizer.mask_token_id
        self.pad_type = int(getattr(tokenizer, "pad_token_type_id", 0) or 0)
        vocab = len(tokenizer)
        self.special = np.zeros(vocab, dtype=bool)  # V: never a candidate nor a random token
        self.special[[i for i in tokenizer.all_special_ids if i is not None and i < vocab]] = True
        weights = (~self.special).astype(np.float64)
        self.replacement_cdf = np.cumsum(weights) / weights.sum()
        self.word_begins = None
        if whole_words:
            from truneg_fairseq.hf.tokenizer_tables import hf_vocab_view

            view = hf_vocab_view(tokenizer)
            self.word_begins = ~np.asarray(view.continuation, dtype=bool)
        self._calls = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def slot_count(self, seq_len: int) -> int:
        """N, the static prediction slots of a batch of ``seq_len`` tokens."""
        return static_slot_count(seq_len, self.mask_prob, self.max_predictions)

    def __call__(self, features: Sequence[Dict]) -> Dict[str, torch.Tensor]:
        real = [f for f in features if not f.get(PADDING_ROW)]
        if not real:  # one stand-in row: the process still runs its share of the update
            batch = self._collate(features[:1])
            batch["labels"].fill_(IGNORE)
            batch[PADDING_ONLY] = True
            return batch
        return self._collate(real)

    def _collate(self, features: Sequence[Dict]) -> Dict[str, torch.Tensor]:
        rows = [np.asarray(f["input_ids"], dtype=np.int64).reshape(-1) for f in features]
        b = len(rows)
        t = max(len(r) for r in rows)
        if self.pad_to_multiple_of:
            t = -(-t // self.pad_to_multiple_of) * self.pad_to_multiple_of
        tokens = np.full((b, t), self.pad, dtype=np.int64)
        for i, r in enumerate(rows):  # one copy per row, not per token
            tokens[i, : len(r)] = r
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        valid = np.arange(t) < lengths[:, None]  # B x T
        given = self._row_field(features, rows, "attention_mask", t, 0)
        if given is not None:  # pre-padded rows: their [PAD] positions are not attended
            valid &= given != 0
        types = self._row_field(features, rows, "token_type_ids", t, self.pad_type)
        special = self._row_field(features, rows, "special_tokens_mask", t, 1)
        if "index" in features[0]:
            index = np.array([int(f["index"]) for f in features], dtype=np.int64)
        else:  # no example index: number the rows in call order
            index = self._calls * b + np.arange(b, dtype=np.int64)
        self._calls += 1
        epoch = int(features[0].get("epoch", self.epoch))
        if tokens.max(initial=0) >= len(self.special):
            raise ValueError(
                f"token id {int(tokens.max())} is outside the tokenizer's {len(self.special)} "
                "entries: the data was tokenized with another tokenizer"
            )
        if (tokens[valid] == self.mask_idx).any():
            raise ValueError(
                f"the data holds the mask token (id {self.mask_idx}) before masking: tokenize the "
                "text with split_special_tokens=True, so that text never produces special tokens"
            )
        candidates = valid & ~self.special[tokens]
        if special is not None:
            candidates &= special == 0
        src, target = mask_rows(
            tokens,
            candidates,
            index,
            seed=self.seed,
            epoch=epoch,
            mask_idx=self.mask_idx,
            pad=self.pad,
            mask_prob=self.mask_prob,
            leave_unmasked_prob=self.leave_unmasked_prob,
            random_token_prob=self.random_token_prob,
            replacement_cdf=self.replacement_cdf,
            word_begins=self.word_begins,
        )
        selected = target != self.pad  # B x T (a selected token is never padding)
        labels = np.where(selected, target, IGNORE)
        n = self.slot_count(t)
        # each row's selected positions first, in order (the stable sort of the plugin's slots)
        positions = np.argsort(~selected, axis=1, kind="stable")[:, :n]  # B x N
        batch = {
            "input_ids": torch.from_numpy(src),
            "attention_mask": torch.from_numpy(valid.astype(np.int64)),
            "labels": torch.from_numpy(labels),
            "mlm_positions": torch.from_numpy(np.ascontiguousarray(positions)),
        }
        if types is not None:
            batch["token_type_ids"] = torch.from_numpy(types)
        return batch

    @staticmethod
    def _row_field(features, rows, key: str, t: int, fill: int) -> Optional[np.ndarray]:
        """B x T int64 of the features' per-token ``key`` (``fill`` past each row's end); None
        when no feature has it. Every feature has it or none does, each as long as its ids."""
        have = [key in f for f in features]
        if not any(have):
            return None
        if not all(have):
            raise ValueError(
                f"{key} is in {sum(have)} of the batch's {len(have)} features: tokenize every "
                f"example alike (all with {key}, or none)"
            )
        out = np.full((len(rows), t), fill, dtype=np.int64)
        for i, (f, r) in enumerate(zip(features, rows)):
            values = np.asarray(f[key], dtype=np.int64).reshape(-1)
            if len(values) != len(r):
                raise ValueError(
                    f"a feature's {key} has {len(values)} entries and its input_ids {len(r)}: "
                    "they come from one tokenizer call"
                )
            out[i, : len(r)] = values
        return out


def tokenize_lines(tokenizer, lines: List[str], max_length: int) -> List[List[int]]:
    """Each line as ids with the tokenizer's special tokens around it, truncated to
    ``max_length``; special-token text inside a line ("[MASK]") is split like any other text."""
    enc = tokenizer(
        lines,
        truncation=True,
        max_length=max_length,
        split_special_tokens=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    return enc["input_ids"]
