"""SQuAD v1.1 for extractive span prediction: windows, token-to-character offsets, decoding.

Tokenization follows the words of the context: the context is split on whitespace (each word
keeps its character span), each word is tokenized on its own with the pre-training tokenizer
(sentencepiece or GPT-2 BPE, with the leading space both use to mark a word start), and every
sub-token points back to its word. Answer character spans therefore map to sub-token spans
exactly at word granularity, and a predicted token span maps back to the context substring
between the first and the last word's characters.

A question gives one or more windows ``<s> question </s> context-window </s>`` of at most
``max_len`` tokens (query cut to ``max_query`` tokens, windows ``doc_stride`` tokens apart).
Training windows that do not contain the whole answer point at position 0 (``<s>``).
"""

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from truneg_fairseq.corpus import CorpusError

logger = logging.getLogger(__name__)


@dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: List[str]
    answer_start: int  # character offset of the first answer (training target)


@dataclass
class Feature:
    example: int  # index into the examples
    tokens: List[int]  # fairseq ids: <s> q </s> ctx </s>
    ctx_offset: int  # position of the first context token in ``tokens``
    token_word: List[int]  # for each context token of the window: word index in the context
    start: int = 0  # answer span in ``tokens`` (0, 0: not in this window)
    end: int = 0


@dataclass
class SquadData:
    examples: List[SquadExample]
    words: List[List[Tuple[int, int]]]  # per example: (char start, char end) of each word
    features: List[Feature]
    skipped: Dict[str, int] = field(default_factory=dict)


def load_squad_json(path) -> List[SquadExample]:
    """Read a SQuAD v1.1 file. Answers whose text does not match the context at
    ``answer_start`` are repaired by searching the text in the context when it occurs there,
    else the question is skipped; both are counted by :func:`build_features`."""
    if not os.path.isfile(path):
        raise CorpusError(f"{path} not found (a SQuAD v1.1 JSON file: train-v1.1.json / dev-v1.1.json)")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
    except (json.JSONDecodeError, KeyError) as e:
        raise CorpusError(f"{path} is not a SQuAD v1.1 JSON file ({e})") from e
    out = []
    for article in data:
        for para in article["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                answers = qa.get("answers", [])
                start = answers[0]["answer_start"] if answers else -1
                out.append(SquadExample(qa["id"], qa["question"], ctx, [a["text"] for a in answers], start))
    return out


def split_words(text: str) -> List[Tuple[int, int]]:
    """Character spans of the whitespace-separated words of ``text``."""
    spans, start = [], None
    for i, ch in enumerate(text):
        if ch.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


class WordTokenizer:
    """Tokenize single words to fairseq ids with the pre-training tokenizer."""

    def __init__(self, dictionary, kind: str, spm_model=None, gpt2_encoder_json=None, gpt2_vocab_bpe=None):
        from truneg_fairseq.glue import Tokenizer

        self.tok = Tokenizer(kind, spm_model, gpt2_encoder_json, gpt2_vocab_bpe)
        self.dictionary = dictionary
        self.cache: Dict[str, List[int]] = {}

    def __call__(self, word: str) -> List[int]:
        ids = self.cache.get(word)
        if ids is None:
            # GPT-2 BPE marks a word start with the space before it (sentencepiece adds its own)
            pieces = self.tok([" " + word if self.tok.kind == "gpt2" else word])[0].split()
            ids = [self.dictionary.index(p) for p in pieces] or [self.dictionary.unk()]
            self.cache[word] = ids
        return ids

    def text(self, text: str) -> List[int]:
        return [i for s, e in split_words(text) for i in self(text[s:e])]


def build_features(examples: List[SquadExample], wt: WordTokenizer, max_len=384, doc_stride=128, max_query=64,
                   train=False) -> SquadData:
    d = wt.dictionary
    feats: List[Feature] = []
    words_all: List[List[Tuple[int, int]]] = []
    kept: List[SquadExample] = []
    skipped = {"answer_mismatch": 0, "answer_repaired": 0, "answer_outside_windows": 0}
    for ex in examples:
        words = split_words(ex.context)
        if train or ex.answers:
            ans = ex.answers[0] if ex.answers else ""
            if ex.context[ex.answer_start: ex.answer_start + len(ans)] != ans:
                found = ex.context.find(ans) if ans else -1
                if found < 0:
                    skipped["answer_mismatch"] += 1
                    continue
                skipped["answer_repaired"] += 1
                ex.answer_start = found
        ctx_ids, tok_word = [], []
        for wi, (s, e) in enumerate(words):
            ids = wt(ex.context[s:e])
            ctx_ids += ids
            tok_word += [wi] * len(ids)
        q = wt.text(ex.question)[:max_query]
        room = max_len - len(q) - 3
        if room < 1:
            raise CorpusError(f"question {ex.qid}: --squad-max-len {max_len} leaves no room for the context")
        a_first = a_last = None
        if ex.answers:
            a_s, a_e = ex.answer_start, ex.answer_start + len(ex.answers[0])
            hit = [wi for wi, (s, e) in enumerate(words) if s < a_e and e > a_s]
            if hit:
                a_first = tok_word.index(hit[0])
                a_last = len(tok_word) - 1 - tok_word[::-1].index(hit[-1])
        ex_feats = []
        start = 0
        while True:
            window = ctx_ids[start: start + room]
            tokens = [d.bos()] + q + [d.eos()] + window + [d.eos()]
            off = len(q) + 2
            f = Feature(len(kept), tokens, off, tok_word[start: start + room])
            if a_first is not None and start <= a_first and a_last < start + room:
                f.start, f.end = off + a_first - start, off + a_last - start
            ex_feats.append(f)
            if start + room >= len(ctx_ids):
                break
            start += doc_stride
        if train and a_first is not None and not any(f.start for f in ex_feats):
            skipped["answer_outside_windows"] += 1
        feats += ex_feats
        words_all.append(words)
        kept.append(ex)
    for k, v in skipped.items():
        if v:
            logger.warning(f"SQuAD: {v} questions {k.replace('_', ' ')}")
    return SquadData(kept, words_all, feats, skipped)


def best_span(start_logits, end_logits, ctx_offset: int, n_ctx: int, n_best: int = 20, max_answer_len: int = 30):
    """Best (score, start, end) over the n-best start and end positions inside the context part
    of one window (end >= start, length <= max_answer_len). Positions are window positions."""
    import torch

    lo, hi = ctx_offset, ctx_offset + n_ctx  # context tokens
    s = start_logits[lo:hi]
    e = end_logits[lo:hi]
    k = min(n_best, s.numel())
    top_s = torch.topk(s, k)
    top_e = torch.topk(e, k)
    # k x k candidate scores, masked where end < start or too long
    cand = top_s.values[:, None] + top_e.values[None, :]
    si, ei = top_s.indices[:, None], top_e.indices[None, :]
    ok = (ei >= si) & (ei - si < max_answer_len)
    cand = cand.masked_fill(~ok, float("-inf"))
    flat = int(cand.argmax())
    a, b = divmod(flat, k)
    if not bool(ok.view(-1)[flat]):
        return float("-inf"), lo, lo
    return float(cand.view(-1)[flat]), lo + int(top_s.indices[a]), lo + int(top_e.indices[b])


def span_text(ex: SquadExample, words, feature: Feature, start: int, end: int) -> str:
    w0 = feature.token_word[start - feature.ctx_offset]
    w1 = feature.token_word[end - feature.ctx_offset]
    return ex.context[words[w0][0]: words[w1][1]]


def decode(data: SquadData, feature_ids, start_logits, end_logits, n_best=20, max_answer_len=30) -> Dict[str, str]:
    """Best answer text per question over all of its windows in a batch.

    feature_ids: indices into ``data.features``; start/end_logits: F x T (padding masked)."""
    best: Dict[int, Tuple[float, str]] = {}
    for row, fi in enumerate(feature_ids):
        f = data.features[fi]
        score, a, b = best_span(start_logits[row], end_logits[row], f.ctx_offset, len(f.token_word), n_best, max_answer_len)
        ex = data.examples[f.example]
        if f.example not in best or score > best[f.example][0]:
            best[f.example] = (score, span_text(ex, data.words[f.example], f, a, b))
    return {data.examples[e].qid: t for e, (_, t) in best.items()}
