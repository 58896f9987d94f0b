"""Tier 2: the registered criterions on a tiny real RoBERTa built by fairseq's masked_lm task."""

import pytest
import torch
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
from fairseq_runs import TINY_TN_ROBERTA, arch_for, build_components, valid_batch
from objective_cases import roberta_criteria
from step_checks import loss_and_grads

from truneg_fairseq.lexicon import SynonymTable, SynonymTableError

CRITERIA = roberta_criteria()


@pytest.fixture(scope="module")
def empty_table(data_bin, tmp_path_factory):
    from fairseq.data import Dictionary

    d = Dictionary.load(str(data_bin / "dict.txt"))
    path = tmp_path_factory.mktemp("empty") / "empty.npz"
    SynonymTable.empty(d.symbols).save(path)
    return path


def test_hc_with_empty_table_equals_fairseq_masked_lm(data_bin, synonym_table, empty_table):
    """With no synonym pair the hard correction is plain masked LM (a table of 0 pairs is
    refused when the criterion is built, so the lookup is emptied after)."""
    from truneg_fairseq.core.lookup import SynonymLookup

    task, model, hc = build_components(
        data_bin, ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)]
    )
    hc.lookup = SynonymLookup(SynonymTable.load(empty_table), len(task.source_dictionary))
    model.eval()  # no dropout: both passes see the same network
    sample = valid_batch(task)
    ref = MaskedLmLoss(MaskedLmConfig(tpu=False), task)

    loss_ref, ss_ref, _, g_ref = loss_and_grads(ref, model, sample)
    loss_hc, ss_hc, log, g_hc = loss_and_grads(hc, model, sample)

    assert int(ss_ref) == int(ss_hc) > 0
    assert torch.allclose(loss_ref, loss_hc, rtol=1e-6)
    assert g_ref.keys() == g_hc.keys()
    for n in g_ref:
        assert torch.allclose(g_ref[n], g_hc[n], atol=1e-7, rtol=1e-5), n
    assert int(log["fn_synonym"]) == 0


def test_hc_corrects_synonym_predictions(data_bin, synonym_table):
    """Force the model to predict a synonym of a masked gold word: HC must drop that position."""
    from truneg_fairseq.lexicon import SynonymTable as T

    task, model, hc = build_components(
        data_bin, ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)]
    )
    model.eval()
    d = task.source_dictionary
    table = T.load(synonym_table)
    gold_id, pred_id = d.index("\u2581primary"), d.index("\u2581main")
    assert pred_id in table.synonyms_of(gold_id)
    sample = valid_batch(task)
    target = sample["target"]
    masked = target.ne(d.pad())
    # put "primary" as the gold at every masked position and make "main" the argmax
    target[masked] = gold_id
    with torch.no_grad():
        model.encoder.lm_head.bias[pred_id] = 1e4
    # expected: masked positions not followed by a continuation piece (subwords are never corrected)
    cont = set(table.continuation_ids.tolist())
    s = torch.where(masked, target, sample["net_input"]["src_tokens"])
    expect = [
        (b, t)
        for b, t in masked.nonzero().tolist()
        if t + 1 >= s.size(1) or int(s[b, t + 1]) not in cont
    ]
    assert 0 < len(expect) < int(masked.sum())  # the batch has both kinds
    loss, ss, log = hc(model, sample)
    assert int(log["fn_synonym"]) == len(expect)
    assert int(log["fn_synonym_sequences"]) == len({b for b, _ in expect})
    # only the subword positions remain in the loss: each has nll ~ 1e4 (main wins by far)
    n_left = int(ss) - len(expect)
    assert float(loss.detach()) == pytest.approx(n_left * 1e4, rel=0.01)


@pytest.mark.parametrize("criterion", CRITERIA)
def test_sharding_sums_to_the_whole_batch(data_bin, synonym_table, criterion):
    """What DDP relies on: summed losses over sample_size are shard-independent, and every
    logged value is summable."""
    task, model, crit = build_components(
        data_bin,
        ["--criterion", criterion, "--synonym-table", str(synonym_table)],
        arch_args=arch_for(criterion),
    )
    model.eval()
    assert crit.logging_outputs_can_be_summed()
    sample = valid_batch(task, 8)
    ds = task.dataset("valid")
    half_a = ds.collater([ds[i] for i in range(4)])
    half_b = ds.collater([ds[i] for i in range(4, 8)])

    loss, ss, log = crit(model, sample)
    la, sa, log_a = crit(model, half_a)
    lb, sb, log_b = crit(model, half_b)
    assert int(sa) + int(sb) == int(ss)
    assert torch.allclose((la + lb) / (sa + sb), loss / ss, rtol=1e-5)
    for k, v in log.items():
        assert torch.is_tensor(v) or isinstance(v, (int, float)), k
        if k in ("loss", "mlm_loss", "corrected_loss", "sr_loss", "sr_dist_sum", "kl_loss"):
            assert torch.allclose(
                torch.as_tensor(log_a[k] + log_b[k]).float(), torch.as_tensor(v).float(), rtol=1e-5
            ), k
        elif k not in ("ntokens",):  # ntokens of two halves may differ from the padded whole
            assert int(log_a[k]) + int(log_b[k]) == int(v), k


@pytest.mark.parametrize("criterion", CRITERIA)
def test_every_parameter_used_and_finite(data_bin, synonym_table, criterion):
    """DDP without find_unused_parameters needs a gradient for every parameter in a step."""
    task, model, crit = build_components(
        data_bin,
        ["--criterion", criterion, "--synonym-table", str(synonym_table)],
        arch_args=arch_for(criterion),
    )
    model.train()
    loss, _, _ = crit(model, valid_batch(task))
    loss.backward()
    unused = [
        n
        for n, p in model.named_parameters()
        if p.requires_grad and p.grad is None and "classification_heads" not in n
    ]
    assert unused == []
    assert torch.isfinite(loss)


def test_soft_reg_adds_weighted_cosine_term(data_bin):
    task, model, sr = build_components(
        data_bin,
        ["--criterion", "mlm_soft_reg", "--synonym-sr-weight", "0.5"],
        arch_args=TINY_TN_ROBERTA,
    )
    model.eval()
    sample = valid_batch(task)
    loss, ss, log = sr(model, sample)
    assert sr.lookup is None  # the table is optional for SR
    assert torch.allclose(loss, log["mlm_loss"] + 0.5 * log["sr_loss"])
    assert 0 < float(log["sr_loss"]) / int(ss) <= 2


@pytest.mark.parametrize("grad_original", [False, True])
def test_sent_kl_gradient_side(data_bin, grad_original):
    """Default: H_s (original sentence) is a fixed target and only H_p gets gradient; with
    --synonym-kl-grad-original both halves of the batched [s_p; s] encoding do."""
    flag = ["--synonym-kl-grad-original"] if grad_original else []
    task, model, kl = build_components(
        data_bin, ["--criterion", "mlm_sent_kl", *flag], arch_args=TINY_TN_ROBERTA
    )
    model.eval()
    sample = valid_batch(task)
    captured = []
    encode = model.mlm_encode

    def capture(tokens):
        h = encode(tokens)
        if h.requires_grad:
            h.retain_grad()
        captured.append(h)
        return h

    model.mlm_encode = capture  # the encoder passes inside the model's forward
    loss, _, log = kl(model, sample)
    captured.pop(0)  # the masked input's pass (the MLM logits)
    loss.backward()
    bsz = sample["target"].size(0)
    assert float(log["kl_loss"]) > 0
    if grad_original:
        assert len(captured) == 1  # one batched call [s_p; s]
        h = captured[0]
        assert h.size(0) == 2 * bsz
        assert h.grad[:bsz].abs().sum() > 0 and h.grad[bsz:].abs().sum() > 0
    else:
        h_p, h_s = captured  # s_p with a graph, s without
        assert h_p.size(0) == h_s.size(0) == bsz
        assert h_p.grad.abs().sum() > 0
        assert not h_s.requires_grad

    # validation (no grad): one batched call either way
    captured.clear()
    with torch.no_grad():
        kl(model, sample)
    assert len(captured) == 2 and captured[1].size(0) == 2 * bsz


def test_criterion_rejects_model_without_lm_head(data_bin, synonym_table):
    lm_args = [
        "--arch",
        "transformer_lm",
        "--decoder-layers",
        "1",
        "--decoder-embed-dim",
        "16",
        "--decoder-ffn-embed-dim",
        "16",
        "--decoder-attention-heads",
        "2",
        "--tokens-per-sample",
        "64",
    ]
    # refused when the criterion is built, before any step
    with pytest.raises(ValueError, match="needs a masked-LM model .*TransformerLanguageModel"):
        build_components(
            data_bin,
            ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)],
            arch_args=lm_args,
            task="language_modeling",
        )


def test_hc_requires_table(data_bin):
    with pytest.raises(ValueError, match="needs --synonym-table"):
        build_components(data_bin, ["--criterion", "mlm_hard_correction"])


def test_table_for_another_dictionary_is_rejected(data_bin, tmp_path):
    other = SynonymTable.empty(["<s>", "<pad>", "</s>", "<unk>", "\u2581other", "\u2581words"])
    path = tmp_path / "other.npz"
    other.save(path)
    with pytest.raises(SynonymTableError, match="built for another dictionary"):
        build_components(
            data_bin, ["--criterion", "mlm_hard_correction", "--synonym-table", str(path)]
        )


def test_missing_table_file(data_bin, tmp_path):
    with pytest.raises(SynonymTableError, match="not found: build it"):
        build_components(
            data_bin,
            ["--criterion", "mlm_soft_reg", "--synonym-table", str(tmp_path / "nope.npz")],
            arch_args=TINY_TN_ROBERTA,
        )
