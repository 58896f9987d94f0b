"""The model/criterion contract: a criterion calls the model exactly once per step, through its
``forward`` and nothing else, and logs terms that add up to the loss.

The model is handed to the criterion inside an opaque wrapper that has no attribute but
``forward`` (as torch's DistributedDataParallel without fairseq's proxy): a criterion that
called a named model method, read a parameter or unwrapped the model would fail here."""

import math

import pytest
import torch
from fairseq.logging import metrics
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, TINY_TN_ROBERTA, build_components, valid_batch

CASES = {
    "hc/fairseq_roberta": (TINY_ROBERTA, "masked_lm", ["--criterion", "mlm_hard_correction"]),
    "hc/truneg_roberta": (TINY_TN_ROBERTA, "masked_lm", ["--criterion", "mlm_hard_correction"]),
    "sr/truneg_roberta": (
        TINY_TN_ROBERTA,
        "masked_lm",
        ["--criterion", "mlm_soft_reg", "--synonym-sr-weight", "0.7"],
    ),
    "kl/truneg_roberta": (
        TINY_TN_ROBERTA,
        "masked_lm",
        ["--criterion", "mlm_sent_kl", "--synonym-kl-weight", "0.3"],
    ),
    "kl_grad/truneg_roberta": (
        TINY_TN_ROBERTA,
        "masked_lm",
        ["--criterion", "mlm_sent_kl", "--synonym-kl-grad-original"],
    ),
    "electra": (
        TINY_ELECTRA,
        "electra",
        ["--criterion", "electra", "--electra-gen-weight", "2", "--electra-disc-weight", "10"],
    ),
    "electra_hc": (TINY_ELECTRA, "electra", ["--criterion", "mlm_hard_correction"]),
    "electra_sr": (
        TINY_ELECTRA,
        "electra",
        ["--criterion", "mlm_soft_reg", "--synonym-sr-weight", "0.5"],
    ),
    "electra_kl_static": (
        TINY_ELECTRA,
        "electra",
        ["--criterion", "mlm_sent_kl", "--mlm-prediction-slots", "static"],
    ),
}
# the logged terms and their weights in the loss, per case (names as logged)
WEIGHTS = {
    "hc/fairseq_roberta": {"mlm_loss": 1, "corrected_loss": -1},
    "hc/truneg_roberta": {"mlm_loss": 1, "corrected_loss": -1},
    "sr/truneg_roberta": {"mlm_loss": 1, "sr_loss": 0.7},
    "kl/truneg_roberta": {"mlm_loss": 1, "kl_loss": 0.3},
    "kl_grad/truneg_roberta": {"mlm_loss": 1, "kl_loss": 1},
    "electra": {"mlm_loss": 2, "disc_loss": 10},
    "electra_hc": {"mlm_loss": 1, "corrected_loss": -1, "disc_loss": 50},
    "electra_sr": {"mlm_loss": 1, "sr_loss": 0.5, "disc_loss": 50},
    "electra_kl_static": {"mlm_loss": 1, "kl_loss": 1, "disc_loss": 50},
}


class Opaque(torch.nn.Module):
    """Only ``forward``; counts the calls."""

    def __init__(self, model):
        super().__init__()
        self.inner = [model]  # not a registered submodule: nothing reachable by attribute
        self.calls = 0

    def forward(self, *args, **kwargs):
        self.calls += 1
        return self.inner[0](*args, **kwargs)

    def __getattr__(self, name):
        if name in ("inner", "calls", "training"):
            return super().__getattr__(name)
        raise AttributeError(f"the criterion asked the model for {name!r}: only forward is allowed")


def _build(case, synonym_table):
    arch, task, crit = CASES[case]
    return build_components(
        synonym_table.parent,
        [*crit, "--synonym-table", str(synonym_table)],
        arch_args=arch,
        task=task,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_one_forward_call_and_every_parameter_trained(case, synonym_table):
    task, model, crit = _build(case, synonym_table)
    model.train()
    wrapped = Opaque(model)
    loss, sample_size, log = crit(wrapped, valid_batch(task))
    assert wrapped.calls == 1
    loss.backward()
    unused = [
        n for n, p in model.named_parameters() if p.grad is None and "classification_heads" not in n
    ]
    assert unused == []  # DDP without --find-unused-parameters


@pytest.mark.parametrize("case", list(CASES))
def test_logged_loss_is_the_weighted_sum_of_the_logged_terms(case, synonym_table):
    task, model, crit = _build(case, synonym_table)
    model.eval()
    logs = [crit(model, valid_batch(task, n))[2] for n in (4, 8)]
    with metrics.aggregate(new_root=True) as agg:
        type(crit).reduce_metrics(logs)
        out = agg.get_smoothed_values()
    weights = WEIGHTS[case]
    terms = [
        k for k in ("mlm_loss", "corrected_loss", "sr_loss", "kl_loss", "disc_loss") if k in out
    ]
    assert sorted(terms) == sorted(weights)
    expect = sum(weights[k] * out[k] for k in terms)
    assert out["loss"] == pytest.approx(
        expect, abs=2e-3
    )  # logged values are rounded (3-4 decimals)
    # and exactly, before rounding: the summed values in the loss's unit
    total = {k: sum(float(log[k]) for log in logs) for k in ["loss", *terms, "sample_size"]}
    per = total["sample_size"] * math.log(2)
    assert total["loss"] / per == pytest.approx(
        sum(weights[k] * total[k] / per for k in terms), rel=1e-5
    )
    if "sr_loss" in weights:
        assert 0 < out["sr_dist"] <= 2  # the cosine distance itself
    if "disc_loss" in weights:
        assert 0 < out["disc_bce"] < 5  # nats per token


def test_hard_correction_is_the_same_through_both_robertas(synonym_table):
    """fairseq's RoBERTa (its masked-LM forward) and the plugin's (the objectives' pass) hold the
    same weights under the same keys and give the same loss and gradients."""
    task, fs_model, fs_crit = _build("hc/fairseq_roberta", synonym_table)
    _, tn_model, tn_crit = _build("hc/truneg_roberta", synonym_table)
    assert fs_model.state_dict().keys() == tn_model.state_dict().keys()
    tn_model.load_state_dict(fs_model.state_dict())
    sample = valid_batch(task)
    results = []
    for model, crit in ((fs_model, fs_crit), (tn_model, tn_crit)):
        model.eval()
        loss, ss, log = crit(model, sample)
        loss.backward()
        results.append(
            (loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None})
        )
    (l1, g1), (l2, g2) = results
    torch.testing.assert_close(l1, l2)
    assert g1.keys() == g2.keys()
    for n in g1:
        torch.testing.assert_close(g1[n], g2[n], msg=lambda m: f"{n}: {m}")


def test_sentence_kl_encodes_the_filled_and_the_original_sentence(synonym_table):
    """kl_h_p is the masked-LM network's encoding of the input with each mask replaced by the
    argmax prediction, kl_h_s that of the input with the gold tokens back."""
    task, model, crit = _build("kl/truneg_roberta", synonym_table)
    model.eval()
    sample = valid_batch(task)
    src, target = sample["net_input"]["src_tokens"], sample["target"]
    masked = target.ne(task.source_dictionary.pad())
    with torch.no_grad():
        net = model(src, masked_tokens=masked, mlm_targets=target, mlm_outputs=("sentence_kl",))
        original = torch.where(masked, target, src)
        filled = original.clone()
        filled[masked] = net["mlm_pred"]
        torch.testing.assert_close(net["kl_h_s"], model.mlm_encode(original))
        torch.testing.assert_close(net["kl_h_p"], model.mlm_encode(filled))
    assert not torch.equal(filled, original)


def test_unknown_output_is_refused(synonym_table):
    task, model, _ = _build("sr/truneg_roberta", synonym_table)
    sample = valid_batch(task)
    with pytest.raises(ValueError, match="unknown mlm_outputs \\['hiddens'\\]"):
        model(
            sample["net_input"]["src_tokens"],
            masked_tokens=sample["target"].ne(1),
            mlm_targets=sample["target"],
            mlm_outputs=("hiddens",),
        )
