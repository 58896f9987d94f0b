"""Evaluate a masked-LM checkpoint: MLM loss, accuracy and the correction statistics.

Works for any fairseq ``masked_lm`` checkpoint (a plain ``masked_lm`` baseline included), so the
statistics of the paper's Table 2 can be compared across criterions on the same masked data: the
masking is seeded, so every checkpoint sees identical masks.
"""

import json
import logging
from pathlib import Path
from typing import Dict, List, Optional

import torch
from fairseq import utils
from fairseq.logging import metrics

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss, SynonymCriterionConfig

logger = logging.getLogger(__name__)


@torch.no_grad()
def evaluate_mlm(
    checkpoint: str, data: str, synonym_table: Optional[str] = None, subset: str = "valid",
    batch_size: int = 32, max_batches: int = 0, seed: int = 1,
) -> Dict[str, float]:
    """Returns {"mlm_loss" (bits/token), "ppl", "mlm_acc" (%), "pred_corr_ratio" (%),
    "iter_corr_ratio" (%), "masked_tokens", "sentences"}."""
    from truneg_fairseq.checkpoints import load_for_inference

    models, cfg, task = load_for_inference(checkpoint, data, {"seed": seed})
    model = models[0].eval()
    crit = CounterFalseNegativeLoss(SynonymCriterionConfig(synonym_table=synonym_table, arch=cfg.model._name), task)
    task.load_dataset(subset, combine=False, epoch=1)
    itr = task.get_batch_iterator(
        dataset=task.dataset(subset), max_sentences=batch_size, seed=seed, num_workers=0,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
    ).next_epoch_itr(shuffle=False)
    logs = []
    for i, sample in enumerate(itr):
        if max_batches and i >= max_batches:
            break
        _, _, log = crit(model, sample)
        logs.append(log)
    with metrics.aggregate(new_root=True) as agg:
        crit.reduce_metrics(logs)
        out = dict(agg.get_smoothed_values())
    out["masked_tokens"] = int(sum(int(l["sample_size"]) for l in logs))
    out["sentences"] = int(sum(int(l["nsentences"]) for l in logs))
    return out


def masked_predictions(model, src_tokens, masked, targets):
    """Argmax of the masked-LM network (ELECTRA: the generator) at the masked positions, M ids.
    src_tokens, targets: B x T (targets: gold ids at the masked positions, padding elsewhere);
    masked: B x T bool."""
    from fairseq.models.roberta import RobertaModel

    from truneg_fairseq.models.objectives import MaskedLMObjectives

    if isinstance(model, MaskedLMObjectives):
        return model(src_tokens, masked_tokens=masked, mlm_targets=targets)["mlm_pred"]  # M
    if isinstance(model, RobertaModel):  # fairseq's own: its masked-LM forward
        return model(src_tokens, masked_tokens=masked)[0].argmax(dim=-1)  # M
    raise ValueError(f"{type(model).__name__} is not a masked-LM model (RoBERTa, BERT or ELECTRA)")


# ---------------------------------------------------------------------------------------------
# raw text on an imported (or any WordPiece) model: Table 2's ratios and Figure 3's cases
# ---------------------------------------------------------------------------------------------
def resolve_checkpoint(path) -> str:
    """A checkpoint file, or a directory written by ``convert_hf.py import`` (its model.pt)."""
    p = Path(path)
    return str(p / "model.pt") if p.is_dir() else str(p)


def wordpiece_encoder(vocab_txt, lowercase: Optional[bool]):
    """WordPiece over ``vocab_txt`` (:mod:`truneg_fairseq.tokenizer`): str -> dict.txt symbols."""
    from truneg_fairseq.tokenizer import TokenizerSpec, build_tokenizer

    return build_tokenizer(TokenizerSpec("wordpiece", vocab=str(vocab_txt), lowercase=lowercase)).pieces


def decode_wordpiece(pieces: List[str]) -> str:
    """Entries back to text: ``##`` pieces join the previous one."""
    out = ""
    for p in pieces:
        out += p[2:] if p.startswith("##") and out else (" " + p if out else p)
    return out


def _text_sequences(text, encode, d, max_len: int, max_lines: int) -> List[torch.Tensor]:
    """One sequence per non-empty line: <s> entries </s>, cut to ``max_len`` ids."""
    seqs = []
    with open(text, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            ids = [d.index(t) for t in encode(line.strip())][: max_len - 2]
            if ids:
                seqs.append(torch.tensor([d.bos()] + ids + [d.eos()]))
            if max_lines and len(seqs) >= max_lines:
                break
    return seqs


@torch.no_grad()
def evaluate_text(
    checkpoint, text, synonym_table: Optional[str] = None, device: str = "cpu", batch_size: int = 32,
    max_len: int = 128, mask_prob: float = 0.15, seed: int = 1, max_lines: int = 0, show: int = 0,
    vocab: Optional[str] = None, lowercase: Optional[bool] = None, print_fn=print, tokenizer=None,
) -> Dict[str, float]:
    """Mask ``mask_prob`` of the entries of each line of ``text`` (seeded, all as ``<mask>``),
    predict them with the model's masked-LM network and count, as the paper's Table 2:
    ``pred_corr_ratio`` = synonym predictions / mispredicted masked entries (%),
    ``iter_corr_ratio`` = sequences with >= 1 synonym prediction / sequences (%). Subword
    pieces are never counted as corrections. ``show`` prints that many Figure-3 cases.
    ``tokenizer`` (:mod:`truneg_fairseq.tokenizer`): the model's; default WordPiece over ``vocab``
    or the vocab.txt beside the checkpoint."""
    from fairseq.data import data_utils

    from truneg_fairseq.hf_convert import load_fairseq_checkpoint
    from truneg_fairseq.lexicon.lookup import SynonymLookup
    from truneg_fairseq.lexicon.synonyms import SynonymTable

    checkpoint = resolve_checkpoint(checkpoint)
    model, task, _ = load_fairseq_checkpoint(checkpoint)
    model.to(device)
    d = task.source_dictionary
    if tokenizer is None:
        vocab = Path(vocab) if vocab else Path(checkpoint).parent / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"no WordPiece vocabulary {vocab}: give the import's vocab.txt with --vocab")
        if lowercase is None:
            info = Path(checkpoint).parent / "import.json"
            recorded = json.loads(info.read_text()).get("lowercase") if info.is_file() else None
            lowercase = True if recorded is None else bool(recorded)
        encode = wordpiece_encoder(vocab, lowercase)
    else:
        encode = tokenizer.pieces
    seqs = _text_sequences(text, encode, d, max_len, max_lines)
    if not seqs:
        raise ValueError(f"{text} has no non-empty lines")
    table = lookup = None
    if synonym_table:
        table = SynonymTable.load(synonym_table)
        table.check_dictionary(d.symbols, synonym_table)
        lookup = SynonymLookup(table, len(d)).to(device)
    gen = torch.Generator().manual_seed(seed)
    mask_idx = d.index("<mask>")
    n = {"sentences": 0, "masked_tokens": 0, "n_wrong": 0, "n_synonym": 0, "n_seq_synonym": 0}
    shown = 0
    for start in range(0, len(seqs), batch_size):
        tokens = data_utils.collate_tokens(seqs[start:start + batch_size], d.pad())  # B x T
        candidates = tokens.ge(d.nspecial) & tokens.ne(mask_idx)
        sel = (torch.rand(tokens.shape, generator=gen) < mask_prob) & candidates  # B x T
        rows = sel.any(dim=1)
        if not rows.any():
            continue
        tokens, sel = tokens[rows], sel[rows]
        src = tokens.masked_fill(sel, mask_idx).to(device)
        tokens, sel = tokens.to(device), sel.to(device)
        pred = masked_predictions(model, src, sel, tokens.masked_fill(~sel, d.pad()))  # M
        gold = tokens[sel]  # M
        if lookup is not None:
            whole = lookup.ends_word(tokens)[sel]
            synonym = whole & lookup.is_synonym(gold, pred)  # M
        else:
            synonym = torch.zeros_like(gold, dtype=torch.bool)
        where = sel.nonzero()  # M x 2 (row, column), in the order of tokens[sel]
        per_row = torch.zeros(tokens.size(0), dtype=torch.long, device=device)
        per_row.index_add_(0, where[:, 0], synonym.long())
        n["sentences"] += tokens.size(0)
        n["masked_tokens"] += gold.numel()
        n["n_wrong"] += int(pred.ne(gold).sum())
        n["n_synonym"] += int(synonym.sum())
        n["n_seq_synonym"] += int(per_row.gt(0).sum())
        for m in synonym.nonzero()[:, 0].tolist()[: max(show - shown, 0)]:
            shown += 1
            row, col = where[m].tolist()
            print_fn(_case(d, tokens[row].tolist(), col, int(gold[m]), int(pred[m]), table, shown))
    out = dict(n)
    out["mlm_acc"] = 100.0 * (n["masked_tokens"] - n["n_wrong"]) / max(n["masked_tokens"], 1)
    out["pred_corr_ratio"] = 100.0 * n["n_synonym"] / max(n["n_wrong"], 1)
    out["iter_corr_ratio"] = 100.0 * n["n_seq_synonym"] / max(n["sentences"], 1)
    return out


def _case(d, tokens: List[int], col: int, gold: int, pred: int, table, number: int) -> str:
    """Figure 3: the sentence with entry ``col`` shown as [MASK] (the other masked entries as
    they were), the gold entry, the prediction and the gold's synonym list."""
    pieces = ["[MASK]" if i == col else d[t] for i, t in enumerate(tokens) if t not in (d.bos(), d.eos(), d.pad())
              or i == col]
    syns = ", ".join(d[i] for i in table.synonyms_of(gold)) if table is not None else ""
    return (f"case {number}\n  masked:     {decode_wordpiece(pieces)}\n  gold:       {d[gold]}\n"
            f"  prediction: {d[pred]}\n  synonyms of '{d[gold]}': {syns}")
