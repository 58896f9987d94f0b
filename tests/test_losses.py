"""Tier 1: the loss math on hand-built tensors, and the device lookup."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from truneg_fairseq.core import losses
from truneg_fairseq.core.lookup import SynonymLookup
from truneg_fairseq.lexicon import SynonymTable
from truneg_fairseq.lexicon.synonyms import dictionary_fingerprint

PAD = 1


def make_table(pairs, num_symbols=10, continuation=()):
    symbols = [f"s{i}" for i in range(num_symbols)]
    arr = np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    return SynonymTable(
        arr, np.asarray(continuation, np.int64), num_symbols, dictionary_fingerprint(symbols)
    )


def test_lookup_is_synonym_matches_pairs():
    table = make_table([(4, 5), (4, 7), (6, 4), (9, 2)])
    lk = SynonymLookup(table, 10)
    gold = torch.tensor([4, 4, 4, 5, 6, 9, 9, 0])
    pred = torch.tensor([5, 7, 6, 4, 4, 2, 3, 0])
    expect = [True, True, False, False, True, True, False, False]
    assert lk.is_synonym(gold, pred).tolist() == expect
    # large ids beyond the table's vocabulary never match
    assert not lk.is_synonym(torch.tensor([9]), torch.tensor([2**20])).any()


def test_lookup_empty_table():
    lk = SynonymLookup(make_table([]), 10)
    assert lk.num_pairs == 0
    assert not lk.is_synonym(torch.tensor([1, 2]), torch.tensor([2, 1])).any()


def test_ends_word_marks_subword_pieces():
    lk = SynonymLookup(make_table([], continuation=[7]), 10)
    tokens = torch.tensor([[4, 7, 5, 6], [5, 6, 4, 7]])  # 7 continues the previous word
    assert lk.ends_word(tokens).tolist() == [[False, True, True, True], [True, True, False, True]]


def test_masked_nll_matches_cross_entropy_and_ignores_pad():
    torch.manual_seed(0)
    logits = torch.randn(5, 11)
    gold = torch.tensor([3, 4, PAD, 7, 0])
    nll = losses.masked_nll(logits, gold, PAD)
    ref = F.cross_entropy(logits, gold, reduction="none")
    assert nll[2] == 0
    keep = gold.ne(PAD)
    assert torch.allclose(nll[keep], ref[keep])


def test_hard_correction_drops_exactly_the_synonym_positions():
    torch.manual_seed(0)
    V = 10
    table = make_table([(4, 5), (6, 8)])
    lk = SynonymLookup(table, V)
    gold = torch.tensor([4, 4, 6, 6, 2])
    pred = torch.tensor([5, 3, 8, 6, 4])  # synonym, wrong, synonym, correct, wrong
    logits = torch.randn(5, V, requires_grad=True)
    nll = losses.masked_nll(logits, gold, PAD)
    corrected = lk.is_synonym(gold, pred)
    assert corrected.tolist() == [True, False, True, False, False]
    loss = nll.sum() - losses.corrected_nll(nll, corrected).sum()
    expect = nll[1] + nll[3] + nll[4]
    assert torch.allclose(loss, expect)
    loss.backward()
    # no gradient at the corrected positions, gradient everywhere else
    assert logits.grad[0].abs().sum() == 0 and logits.grad[2].abs().sum() == 0
    assert all(logits.grad[i].abs().sum() > 0 for i in (1, 3, 4))


def test_soft_regularization_hand_computed():
    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    gold = torch.tensor([0, 0, 0, 2])
    pred = torch.tensor([0, 1, 3, 0])
    sr = losses.soft_regularization(E[gold], E[pred])
    expect = torch.tensor([0.0, 1.0, 2.0, 1.0 - 1.0 / math.sqrt(2.0)])
    assert torch.allclose(sr, expect, atol=1e-6)
    assert (sr >= 0).all() and (sr <= 2).all()


def test_soft_regularization_gradient_reaches_both_rows():
    E = torch.randn(6, 4, requires_grad=True)
    losses.soft_regularization(E[torch.tensor([1])], E[torch.tensor([3])]).sum().backward()
    nz = E.grad.abs().sum(1).nonzero().flatten().tolist()
    assert nz == [1, 3]


def test_sentence_kl_zero_for_identical_positive_otherwise():
    torch.manual_seed(0)
    h = torch.randn(2, 5, 8)
    assert torch.allclose(losses.sentence_kl(h, h.clone()), torch.zeros(2, 5), atol=1e-6)
    h2 = h.clone()
    h2[1, 3] += torch.randn(8)
    kl = losses.sentence_kl(h2, h)
    assert kl[1, 3] > 1e-4
    assert torch.allclose(kl[0], torch.zeros(5), atol=1e-6)
    # equals the definition sum p log(p/q)
    p, q = F.softmax(h2[1, 3], -1), F.softmax(h[1, 3], -1)
    assert torch.allclose(kl[1, 3], (p * (p / q).log()).sum(), atol=1e-6)
