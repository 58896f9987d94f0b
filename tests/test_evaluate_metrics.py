"""The plugin's own metric code pinned to the reference definitions on known cases: SQuAD v1.1
(the official script's normalisation, the max over gold answers, its quirks) and the
BERTScore-like similarity of CLINE's Hits (greedy cosine matching, uniform or idf weights)."""

import math

import pytest
import torch

from truneg_fairseq.evaluation import hits as H
from truneg_fairseq.evaluation.squad_metrics import evaluate, exact_match, f1, normalize_answer


# ---- SQuAD v1.1: the official definitions ----------------------------------------------------------
@pytest.mark.parametrize(
    "text, want",
    [
        ("The Eiffel Tower!", "eiffel tower"),  # lower-case, ASCII punctuation off, articles off
        ("An\tapple,\n a pear", "apple pear"),  # any whitespace collapses
        ("Theatre and another", "theatre and another"),  # articles only as whole words
        ("Paris\u2014France", "paris\u2014france"),  # only ASCII punctuation is removed
        ("U.S.A.", "usa"),  # punctuation removed before the articles: no new word breaks
        ("a-the", "athe"),  # ... so "a-the" is one word, no article left
        ("", ""),
    ],
)
def test_normalisation_is_the_official_one(text, want):
    assert normalize_answer(text) == want


def test_f1_and_exact_match_known_values():
    # repeated tokens count as often as both sides hold them: pred [cat, cat], gold [cat]
    assert f1("the cat cat", "a cat") == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))
    assert f1("big red barn", "the red barn door") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    # the official v1.1 quirk: answers that normalise to nothing match exactly, with F1 0
    assert exact_match("The", "a") == 1.0 and f1("The", "a") == 0.0


def _data(*qas):
    return [
        {
            "paragraphs": [
                {
                    "context": "c",
                    "qas": [
                        {"id": qid, "answers": [{"text": g, "answer_start": 0} for g in golds]}
                        for qid, golds in qas
                    ],
                }
            ]
        }
    ]


def test_evaluate_takes_the_max_over_gold_answers_per_metric():
    # F1 against each gold: "denver broncos" P 2/3 R 1 -> 0.8; "broncos of denver in 2016" P 1
    # R 3/5 -> 0.75; the max is taken, not the first or the mean
    data = _data(("q", ["Denver Broncos", "the Broncos of Denver in 2016"]))
    res = evaluate(data, {"q": "Broncos of Denver"})
    best_f1 = max(
        f1("Broncos of Denver", g) for g in ["Denver Broncos", "the Broncos of Denver in 2016"]
    )
    assert res["exact_match"] == 0.0 and res["f1"] == pytest.approx(100 * best_f1)
    assert best_f1 == pytest.approx(0.8)
    # a question without a prediction scores 0 and counts in the total
    two = evaluate(_data(("q", ["Denver"]), ("r", ["x"])), {"q": "denver."})
    assert two == {"exact_match": 50.0, "f1": 50.0, "questions": 2, "missing_predictions": 1}


# ---- BERTScore-like Hits ------------------------------------------------------------------------
def _pair():
    """x: <s> e1 e2; y: <s> e1 (e1+e2)/sqrt2 -- cosines x1.y1 = 1, x1.y2 = x2.y2 = 1/sqrt2,
    x2.y1 = 0; the <s> vectors equal e2 (a perfect match for x2 if it were allowed)."""
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    x = torch.stack([e2, e1, e2]).unsqueeze(0)
    y = torch.stack([e2, e1, (e1 + e2) / math.sqrt(2)]).unsqueeze(0)
    m = torch.tensor([[False, True, True]])
    return x, y, m


def test_bertscore_uniform_weights_known_value():
    x, y, m = _pair()
    r = 1 / math.sqrt(2)
    got = H.sentence_similarities(x, y, m, m)["bertscore"]
    # precision: x1 -> 1, x2 -> 1/sqrt2 (not the <s> vector); recall: y1 -> 1, y2 -> 1/sqrt2
    assert got.item() == pytest.approx((1 + r) / 2)


def test_bertscore_weighted_means_follow_the_definition():
    x, y, m = _pair()
    r = 1 / math.sqrt(2)
    wx, wy = torch.tensor([[9.0, 1.0, 3.0]]), torch.tensor([[9.0, 2.0, 1.0]])
    got = H.sentence_similarities(x, y, m, m, wx, wy)["bertscore"].item()
    p, rec = (1 + 3 * r) / 4, (2 + r) / 3  # the <s> weights (9) are masked out
    assert got == pytest.approx(2 * p * rec / (p + rec))


def test_idf_weights_are_bertscores():
    refs = [[5, 6], [5, 7, 7], [8]]
    idf = H.idf_weights(refs)
    assert idf[5] == pytest.approx(math.log(4 / 3))  # in 2 of 3 references
    assert idf[7] == pytest.approx(math.log(4 / 2))  # twice in one reference: df 1
    got = H.idf_of(idf, torch.tensor([[5, 8, 99]]), len(refs))
    assert got.tolist()[0] == pytest.approx([math.log(4 / 3), math.log(2), math.log(4)])


class _Embedder(torch.nn.Module):
    """A model whose only layer is a fixed embedding (the interface :func:`hits` reads)."""

    def __init__(self, table):
        super().__init__()
        self.emb = torch.nn.Embedding.from_pretrained(table)

    def discriminator_hidden_states(self, tokens):
        return [self.emb(tokens)]


class _Words:
    """Whitespace words as dictionary symbols (one piece per word)."""

    def encode_words(self, words):
        return [[(w, 0, len(w))] for w in words]


def test_hits_idf_changes_the_winner_as_the_weights_say():
    """One triplet whose word vectors make uniform weights prefer the antonym sentence (it
    shares the common word "c") and idf weights prefer the synonym sentence ("c" is in every
    original sentence: idf ln(3/3) = 0, so the rare "w" and its near-synonym "s" decide)."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for w in ("c", "w", "s", "d", "x", "z"):
        d.add_symbol(w)
    vec = {
        "c": [1.0, 0.0, 0.0, 0.0],
        "w": [0.0, 1.0, 0.0, 0.0],
        "s": [0.0, 0.9, math.sqrt(1 - 0.81), 0.0],  # cos(s, w) = 0.9
        "d": [0.0, 0.0, 0.0, 1.0],
        "x": [0.0, 0.3, 0.0, math.sqrt(1 - 0.09)],  # cos(x, w) = 0.3
        "z": [0.5, 0.5, 0.5, 0.5],
    }
    table = torch.zeros(len(d), 4)
    for w, v in vec.items():
        table[d.index(w)] = torch.tensor(v)
    model = _Embedder(table)
    # the second triplet, all three sentences equal, is a tie (never a hit)
    triplets = [("c w", "d s", "c x"), ("c z", "c z", "c z")]
    # uniform: syn F1 0.45 < ant F1 0.65; idf: syn F1 0.6 > ant F1 0.3
    assert H.hits(model, d, _Words(), triplets)["bertscore"] == [0.0]
    assert H.hits(model, d, _Words(), triplets, idf=True)["bertscore"] == [50.0]
