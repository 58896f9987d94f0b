"""SQuAD v1.1 for extractive span prediction: windows, token-to-character offsets, decoding.

Tokenization follows the words of the context: the pre-training tokenizer
(:mod:`truneg_fairseq.text`) gives the words with their character spans (whitespace words
for sentencepiece and GPT-2 BPE, each tokenized on its own with the leading space both use to
mark a word start; BERT's words for WordPiece, punctuation split off), and every sub-token
points back to its word. Answer character spans therefore map to sub-token spans
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

from truneg_fairseq.data.corpus_steps import CorpusError
from truneg_fairseq.text import Tokenizer, TokenizerSpec, build_tokenizer

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


class SquadExamples(list):
    """The questions of a SQuAD file (:class:`SquadExample`), with ``skipped``: what the reader
    repaired or skipped, per reason."""

    def __init__(self, examples=(), skipped: Dict[str, int] = None):
        super().__init__(examples)
        self.skipped = dict(skipped or {})


PROGRESS_EVERY = 10_000  # a progress line per this many questions tokenized
PROGRESS_EVERY_ARTICLES = 100  # and per this many articles read (SQuAD v1.1 train: 442)


def read_squad_file(path, check_answers: bool = True) -> Tuple[dict, Dict[str, int]]:
    """Read and validate a SQuAD v1.1 JSON file: the one reader behind the task, the
    perturbations, prediction and evaluation. Returns (the SQuAD object, counts).

    A file that is not JSON, has no ``data`` list, no articles, or an article/paragraph/question
    /answer without its required fields is a ``CorpusError`` naming the file (and the question
    id). A question without a ``question`` text is skipped and counted (``no_question``). With
    ``check_answers``, an answer whose text is not at ``answer_start`` is moved to the occurrence
    of its text nearest ``answer_start`` (``answer_repaired``); an answer whose text is not in
    the context is dropped, and a question left without answers is skipped
    (``answer_mismatch``). The returned object holds only the kept questions."""
    obj = _load_squad_json(path)
    articles = obj["data"]
    counts = {"answer_mismatch": 0, "answer_repaired": 0, "no_question": 0}
    no_question: List[str] = []
    out_articles = []
    for ai, article in enumerate(articles):
        if ai and ai % PROGRESS_EVERY_ARTICLES == 0:
            logger.info(f"{path}: {ai} of {len(articles)} articles read")
        paras = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paras, list):
            raise CorpusError(f'{path}: article {ai} has no "paragraphs" list')
        out_paras = []
        for pi, para in enumerate(paras):
            if (
                not isinstance(para, dict)
                or not isinstance(para.get("context"), str)
                or not isinstance(para.get("qas"), list)
            ):
                raise CorpusError(
                    f'{path}: article {ai}, paragraph {pi}: needs a "context" text and a "qas" list'
                )
            ctx = para["context"]
            qas = []
            for qa in para["qas"]:
                qid = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qid, str) or not qid:
                    raise CorpusError(
                        f'{path}: article {ai}, paragraph {pi}: a question has no "id"'
                    )
                if not isinstance(qa.get("question"), str) or not qa["question"].strip():
                    counts["no_question"] += 1
                    no_question.append(qid)
                    continue
                answers = qa.get("answers", [])
                if not isinstance(answers, list) or not all(
                    isinstance(a, dict)
                    and isinstance(a.get("text"), str)
                    and isinstance(a.get("answer_start"), int)
                    for a in answers
                ):
                    raise CorpusError(
                        f'{path}: question {qid}: "answers" must be a list of {{"text", "answer_start"}}'
                    )
                if check_answers and answers:
                    kept = _answers_in_context(ctx, answers, counts)
                    if not kept:
                        counts["answer_mismatch"] += 1
                        continue
                    qa = dict(qa, answers=kept)
                qas.append(qa)
            out_paras.append(dict(para, qas=qas))
        out_articles.append(dict(article, paragraphs=out_paras))
    if no_question:
        more = f" and {len(no_question) - 5} more" if len(no_question) > 5 else ""
        logger.warning(
            f'{path}: skipped {len(no_question)} questions without a "question" text '
            f'(ids {", ".join(no_question[:5])}{more})'
        )
    if counts["answer_mismatch"] or counts["answer_repaired"]:
        logger.warning(
            f"{path}: {counts['answer_repaired']} answers moved to their text's occurrence nearest "
            f"answer_start; {counts['answer_mismatch']} questions skipped (answer text not in the context)"
        )
    if not any(para["qas"] for article in out_articles for para in article["paragraphs"]):
        raise CorpusError(
            f"{path}: no usable questions ({', '.join(f'{k}: {v}' for k, v in counts.items() if v) or 'none given'})"
        )
    return dict(obj, data=out_articles), counts


def _load_squad_json(path) -> dict:
    """The JSON object of a SQuAD file with a non-empty ``data`` list (else a CorpusError)."""
    if not os.path.isfile(path):
        raise CorpusError(
            f"{path} not found (a SQuAD v1.1 JSON file: train-v1.1.json / dev-v1.1.json)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path} is not JSON ({e}); expected a SQuAD v1.1 file") from None
    articles = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(articles, list):
        raise CorpusError(
            f'{path} is not a SQuAD v1.1 file: no "data" list of articles at the top level'
        )
    if not articles:
        raise CorpusError(f'{path}: "data" is empty (no articles, so no questions)')
    return obj


def _answers_in_context(context: str, answers: List[dict], counts: Dict[str, int]) -> List[dict]:
    """The answers whose text is in ``context``, each moved to the occurrence nearest its
    ``answer_start`` (counted as ``answer_repaired`` when it moves)."""
    kept = []
    for a in answers:
        start = nearest_occurrence(context, a["text"], a["answer_start"])
        if start < 0:
            continue
        if start != a["answer_start"]:
            counts["answer_repaired"] += 1
            a = dict(a, answer_start=start)
        kept.append(a)
    return kept


def nearest_occurrence(context: str, text: str, answer_start: int) -> int:
    """Character offset of the occurrence of ``text`` in ``context`` nearest ``answer_start``
    (``answer_start`` itself when the text is there; -1 when it is nowhere)."""
    if not text:
        return -1
    if answer_start >= 0 and context[answer_start : answer_start + len(text)] == text:
        return answer_start
    best, at = -1, context.find(text)
    while at >= 0:
        if best < 0 or abs(at - answer_start) < abs(best - answer_start):
            best = at
        at = context.find(text, at + 1)
    return best


def load_squad_json(path) -> SquadExamples:
    """The questions of a SQuAD v1.1 file, validated and repaired by :func:`read_squad_file`
    (its counts in ``.skipped``, reported again by :func:`build_features`)."""
    obj, counts = read_squad_file(path)
    out = SquadExamples(skipped=counts)
    for article in obj["data"]:
        for para in article["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                answers = qa.get("answers", [])
                start = answers[0]["answer_start"] if answers else -1
                out.append(
                    SquadExample(qa["id"], qa["question"], ctx, [a["text"] for a in answers], start)
                )
    return out


class WordTokenizer:
    """The pre-training tokenizer (:mod:`truneg_fairseq.text`) over a fairseq dictionary:
    words of a text with their character spans, and their fairseq ids.

    ``tokenizer``: a :class:`~truneg_fairseq.text.Tokenizer`, or its kind with the files."""

    def __init__(
        self,
        dictionary,
        tokenizer,
        spm_model=None,
        gpt2_encoder_json=None,
        gpt2_vocab_bpe=None,
        vocab=None,
    ):
        if not isinstance(tokenizer, Tokenizer):
            tokenizer = build_tokenizer(
                TokenizerSpec(tokenizer, spm_model, gpt2_encoder_json, gpt2_vocab_bpe, vocab)
            )
        self.tok = tokenizer
        self.dictionary = dictionary
        self.cache: Dict[str, List[int]] = {}

    def _ids(self, pieces: List[str]) -> List[int]:
        return [self.dictionary.index(p) for p in pieces] or [self.dictionary.unk()]

    def __call__(self, word: str) -> List[int]:
        """fairseq ids of one whitespace-free word."""
        ids = self.cache.get(word)
        if ids is None:
            ids = self.cache[word] = self._ids(self.tok.word_pieces(word))
        return ids

    def words(self, text: str) -> Tuple[List[Tuple[int, int]], List[List[int]]]:
        """(character span of each word, its fairseq ids), words as the tokenizer sees them."""
        spans, pieces = self.tok.words(text)
        return spans, [self._ids(p) for p in pieces]

    def text(self, text: str) -> List[int]:
        return [i for ids in self.words(text)[1] for i in ids]


def build_features(
    examples: List[SquadExample],
    wt: WordTokenizer,
    max_len=384,
    doc_stride=128,
    max_query=64,
    train=False,
) -> SquadData:
    d = wt.dictionary
    feats: List[Feature] = []
    words_all: List[List[Tuple[int, int]]] = []
    kept: List[SquadExample] = []
    # answers were checked (and repaired) by the reader, read_squad_file; its counts come first
    reader = examples.skipped if isinstance(examples, SquadExamples) else {}
    skipped = {**reader, "answer_outside_windows": 0}
    total = len(examples)
    for n, ex in enumerate(examples, 1):
        if n % PROGRESS_EVERY == 0:
            logger.info(f"SQuAD: {n} of {total} questions tokenized ({len(feats)} windows)")
        words, word_ids = wt.words(ex.context)
        ctx_ids, tok_word = [], []
        for wi, ids in enumerate(word_ids):
            ctx_ids += ids
            tok_word += [wi] * len(ids)
        q = wt.text(ex.question)[:max_query]
        room = max_len - len(q) - 3
        if room < 1:
            raise CorpusError(
                f"question {ex.qid}: --squad-max-len {max_len} leaves no room for the context"
            )
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
            window = ctx_ids[start : start + room]
            tokens = [d.bos()] + q + [d.eos()] + window + [d.eos()]
            off = len(q) + 2
            f = Feature(len(kept), tokens, off, tok_word[start : start + room])
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
    if skipped["answer_outside_windows"]:
        logger.warning(
            f"SQuAD: {skipped['answer_outside_windows']} questions answer outside windows"
        )
    return SquadData(kept, words_all, feats, skipped)


def best_span(
    start_logits,
    end_logits,
    ctx_offset: int,
    n_ctx: int,
    n_best: int = 20,
    max_answer_len: int = 30,
):
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


SPAN_HEAD = "squad_span"  # the model's classification head giving start/end logits per token


def span_logits(model, src_tokens, padding_idx: int):
    """Start and end logits of every window position, for training and prediction alike.

    src_tokens: F x T windows; returns (start, end), each F x T in fp32 with padding at -1e4."""
    logits = model(src_tokens, features_only=True, classification_head_name=SPAN_HEAD)[
        0
    ].float()  # F x T x 2
    logits = logits.masked_fill(src_tokens.eq(padding_idx).unsqueeze(-1), -1e4)
    return logits.unbind(-1)


def decoding_info(data: SquadData, feature_ids: List[int], width: int) -> dict:
    """What decoding a batch of whole questions needs, carried by the batch itself: per question
    its id, context and gold answers; per window (F) its question (``feature_question``: F) and the
    character span of each context token (``token_chars``: F x width x 2, -1 outside the
    context). The whole dataset never travels with a batch."""
    import torch

    questions: Dict[int, int] = {}
    chars = torch.full((len(feature_ids), width, 2), -1, dtype=torch.long)  # F x T x 2
    for row, fi in enumerate(feature_ids):
        f = data.features[fi]
        questions.setdefault(f.example, len(questions))
        words = data.words[f.example]
        if f.token_word:
            spans = torch.tensor([words[w] for w in f.token_word])  # n_ctx x 2
            chars[row, f.ctx_offset : f.ctx_offset + len(f.token_word)] = spans
    exs = [data.examples[e] for e in questions]
    return {
        "qids": [ex.qid for ex in exs],
        "contexts": [ex.context for ex in exs],
        "answers": [list(ex.answers) for ex in exs],
        "feature_question": torch.tensor(
            [questions[data.features[fi].example] for fi in feature_ids]
        ),  # F
        "token_chars": chars,
    }


def decode(info: dict, start_logits, end_logits, n_best=20, max_answer_len=30) -> Dict[str, str]:
    """Best answer text per question over all of its windows in a batch.

    info: :func:`decoding_info` of the batch; start/end_logits: F x T (:func:`span_logits`)."""
    chars = info["token_chars"].cpu()
    start_logits, end_logits = start_logits.detach().cpu(), end_logits.detach().cpu()
    best: Dict[int, Tuple[float, str]] = {}
    for row, q in enumerate(info["feature_question"].tolist()):
        in_ctx = (chars[row, :, 0] >= 0).nonzero().view(-1)
        if in_ctx.numel() == 0:
            continue
        lo = int(in_ctx[0])
        score, a, b = best_span(
            start_logits[row], end_logits[row], lo, in_ctx.numel(), n_best, max_answer_len
        )
        text = info["contexts"][q][int(chars[row, a, 0]) : int(chars[row, b, 1])]
        if q not in best or score > best[q][0]:
            best[q] = (score, text)
    return {info["qids"][q]: best[q][1] if q in best else "" for q in range(len(info["qids"]))}
