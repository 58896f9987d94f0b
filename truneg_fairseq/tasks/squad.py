"""``--task squad``: SQuAD v1.1 extractive QA on an ELECTRA discriminator or a RoBERTa encoder.

DATA holds ``dict.txt`` (the pre-training dictionary) and ``train.json`` / ``valid.json`` in the
SQuAD v1.1 format. Windows are built at load time (see :mod:`truneg_fairseq.data.squad_windows`); a span head
(``classification_heads.squad_span``: dense + out_proj to start/end logits per token) is added to
the model, so ``--restore-file`` from a pre-training checkpoint starts it fresh. Validation
batches hold whole questions (all of their windows), so EM/F1 are computed per question.
"""

import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
from fairseq import utils
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.tasks import FairseqTask, register_task

from truneg_fairseq.data import squad_windows as squad
from truneg_fairseq.errors import CorpusError
from truneg_fairseq.text import TokenizerSpec, build_tokenizer, tokenizer_fields

logger = logging.getLogger(__name__)
HEAD = squad.SPAN_HEAD


def _report_unknown(features, unk: int, where: str, dictionary=None, tokenizer=None, texts=()):
    """Log the share of ``<unk>`` among the windows' tokens, as a warning above
    :data:`truneg_fairseq.data.corpus_steps.UNKNOWN_WARNING` % naming the cause (casing or a
    vocabulary mismatch, :func:`truneg_fairseq.data.corpus_steps.unknown_cause` on ``texts``)."""
    from truneg_fairseq.data.corpus_steps import UNKNOWN_WARNING, unknown_cause

    n = sum(len(f.tokens) for f in features)
    n_unk = sum(f.tokens.count(unk) for f in features)  # once per split, at load time
    pct = 100.0 * n_unk / max(n, 1)
    msg = f"{where}: {n_unk} of {n} tokens ({pct:.3g}%) are <unk>"
    if pct > UNKNOWN_WARNING:
        cause = (
            unknown_cause(dictionary, tokenizer, texts)
            if dictionary is not None and tokenizer is not None
            else "the tokenizer does not fit the vocabulary (check --squad-lowercase and the "
            "pre-training tokenizer files)"
        )
        logger.warning(f"{msg}: {cause}")
    else:
        logger.info(msg)
    return pct


@dataclass
class SquadConfig(tokenizer_fields("squad", " of the pre-training data", default="sentencepiece")):
    data: str = field(
        default="???", metadata={"help": "folder with dict.txt, train.json, valid.json"}
    )
    squad_max_len: int = field(default=384, metadata={"help": "tokens per window"})
    squad_doc_stride: int = field(default=128, metadata={"help": "tokens between window starts"})
    squad_max_query: int = field(default=64, metadata={"help": "question tokens kept"})
    squad_n_best: int = field(default=20, metadata={"help": "start/end candidates per window"})
    squad_max_answer_len: int = field(default=30, metadata={"help": "longest answer in tokens"})


class SpanHead(nn.Module):
    """Start/end logits per token: B x T x C -> B x T x 2 (names match fairseq's heads)."""

    def __init__(self, hidden: int, activation="gelu"):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = utils.get_activation_fn(activation)
        self.out_proj = nn.Linear(hidden, 2)

    def forward(self, features, **kwargs):
        return self.out_proj(self.activation(self.dense(features)))


class SquadDataset(FairseqDataset):
    """Training: one item per window. Validation: one item per question (all its windows)."""

    def __init__(self, data: squad.SquadData, pad: int, by_question: bool, split: str):
        self.data, self.pad, self.by_question, self.split = data, pad, by_question, split
        if by_question:
            groups = {}
            for i, f in enumerate(data.features):
                groups.setdefault(f.example, []).append(i)
            self.items = [groups[e] for e in sorted(groups)]
        else:
            self.items = [[i] for i in range(len(data.features))]
        self._sizes = np.array([max(len(data.features[i].tokens) for i in it) for it in self.items])

    def __getitem__(self, index):
        return {"id": index, "features": self.items[index]}

    def __len__(self):
        return len(self.items)

    def num_tokens(self, index):
        return int(self._sizes[index]) * len(self.items[index])

    def size(self, index):
        return int(self._sizes[index])

    @property
    def sizes(self):
        return self._sizes

    def ordered_indices(self):
        return np.argsort(self._sizes, kind="mergesort")

    def collater(self, samples):
        if not samples:
            return {}
        fids = [fi for s in samples for fi in s["features"]]
        feats = [self.data.features[i] for i in fids]
        tokens = data_utils.collate_tokens(
            [torch.tensor(f.tokens) for f in feats], self.pad
        )  # F x T
        batch = {
            "id": torch.tensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(tokens.ne(self.pad).sum()),
            "net_input": {"src_tokens": tokens},
            "start": torch.tensor([f.start for f in feats]),  # F
            "end": torch.tensor([f.end for f in feats]),  # F
        }
        if self.by_question:  # what decoding needs, for this batch's questions only
            batch["squad"] = squad.decoding_info(self.data, fids, tokens.size(1))
        return batch


@register_task("squad", dataclass=SquadConfig)
class SquadTask(FairseqTask):
    def __init__(self, cfg: SquadConfig, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary

    @classmethod
    def setup_task(cls, cfg: SquadConfig, **kwargs):
        path = os.path.join(cfg.data, "dict.txt")
        if not os.path.isfile(path):
            raise CorpusError(
                f"{path} not found: DATA must hold the pre-training dict.txt next to train.json/valid.json"
            )
        d = Dictionary.load(path)
        d.add_symbol("<mask>")  # as the pre-training task did, so ids and embedding sizes match
        return cls(cfg, d)

    def word_tokenizer(self):
        return squad.WordTokenizer(
            self.dictionary, build_tokenizer(TokenizerSpec.from_config(self.cfg, "squad"))
        )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        c = self.cfg
        examples = squad.load_squad_json(os.path.join(c.data, f"{split}.json"))
        train = split == "train"
        wt = self.word_tokenizer()
        data = squad.build_features(
            examples,
            wt,
            c.squad_max_len,
            c.squad_doc_stride,
            c.squad_max_query,
            train=train,
        )
        logger.info(
            f"SQuAD {split}: {len(data.examples)} questions, {len(data.features)} windows, skipped {data.skipped}"
        )
        _report_unknown(
            data.features,
            self.dictionary.unk(),
            os.path.join(c.data, f"{split}.json"),
            self.dictionary,
            wt.tok,
            dict.fromkeys(t for e in data.examples for t in (e.question, e.context)),
        )
        self.datasets[split] = SquadDataset(
            data, self.dictionary.pad(), by_question=not train, split=split
        )

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        hidden = (
            getattr(getattr(model, "cfg", None), "electra_hidden_dim", None)
            or model.args.encoder_embed_dim
        )
        model.classification_heads[HEAD] = SpanHead(hidden)
        return model

    def max_positions(self):
        return self.cfg.squad_max_len

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary
