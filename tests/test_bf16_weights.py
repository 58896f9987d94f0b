"""bf16 compute copies of the linear layers' weights under ``--bf16`` (truneg_fairseq/compat/
bf16_weights.py): the update gives exactly the weights, optimizer state and log of autocast over
fp32 weights, with two casts per linear tensor fewer, and the model holds its fp32 weights
between updates."""

import json

import torch
from fairseq_runs import TINY_ELECTRA, TINY_TN_ROBERTA, fairseq_train
from torch import nn

from truneg_fairseq.training.bf16_weights import Bf16ComputeWeights
from truneg_fairseq.training.fast_update import FastUpdate

FAST = ["--optimizer", "fused_adamw", "--clip-norm", "1.0", "--bf16", "--disable-validation"]
FAST += ["--synonym-table", "synonyms.npz", "--log-format", "json", "--log-interval", "2"]


class Tied(nn.Module):
    """Two linear layers, one of them sharing its weight with an embedding, one kept in fp32."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 11, bias=False)
        self.out.weight = self.embed.weight  # tied: not copied
        self.head = nn.Linear(8, 1)
        self.head.truneg_fp32 = True  # runs outside autocast: not copied

    def forward(self, tokens):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.tanh(self.hidden(self.embed(tokens)))
            logits = self.out(h)
        with torch.autocast("cpu", enabled=False):
            score = self.head(h.float())
        return logits.float().logsumexp(-1).sum() + score.sum()


def _grads(model, batches, copies=None):
    model.zero_grad(set_to_none=True)
    if copies is not None:
        copies.begin()
    try:
        for tokens in batches:
            model(tokens).backward()
            if copies is not None:
                copies.collect()
    finally:
        if copies is not None:
            copies.end()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_copies_give_autocasts_gradients_and_leave_the_fp32_weights_in_place():
    torch.manual_seed(0)
    model = Tied()
    params = dict(model.named_parameters())
    copies = Bf16ComputeWeights(model)
    assert {id(w) for w in copies.weights} == {id(model.hidden.weight), id(model.hidden.bias)}
    batches = [torch.randint(0, 11, (4, 5)) for _ in range(2)]
    for n in (1, 2):  # one sub-batch, and two accumulated in fp32
        reference = _grads(model, batches[:n])
        with_copies = _grads(model, batches[:n], copies)
        assert reference.keys() == with_copies.keys()
        for name in reference:
            assert with_copies[name].dtype == torch.float32
            assert torch.equal(with_copies[name], reference[name]), (n, name)
    # the layers hold their own fp32 parameters again, and the copies follow a changed weight
    assert dict(model.named_parameters()) == params
    assert all(p.dtype == torch.float32 for p in model.parameters())
    with torch.no_grad():
        model.hidden.weight.add_(1.0)
    copies.begin()
    try:
        assert model.hidden.weight.dtype == torch.bfloat16
        assert torch.equal(model.hidden.weight, params["hidden.weight"].detach().bfloat16())
    finally:
        copies.end()
    assert model.hidden.weight is params["hidden.weight"]


def _train(data_bin, path, args, copies: bool, monkeypatch):
    monkeypatch.setattr(FastUpdate, "compute_copies", copies)
    run = fairseq_train(data_bin, path, [*args, *FAST])
    out = run.stdout + run.stderr
    assert "training updates: without host-device synchronisation" in out
    assert ("linear-layer tensors run on bf16 copies of their fp32 weights" in out) == copies
    logs = [
        {k: v for k, v in json.loads(line.split("| train_inner | ", 1)[1]).items()
         if k not in ("wps", "ups", "wall", "train_wall")}
        for line in run.stdout.splitlines()
        if "| train_inner | " in line
    ]  # fmt: skip
    state = torch.load(path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    return logs, state


def test_fairseq_train_bf16_updates_are_autocasts_to_the_bit(
    data_bin, synonym_table, tmp_path, monkeypatch
):
    """ELECTRA (generator, sampling, discriminator with its fp32 logit layer) with --update-freq
    2, and the plugin's RoBERTa: the same log and the same checkpoint, weights and AdamW moments,
    with the copies as without."""
    runs = {
        "electra": [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra"],
        "roberta": [*TINY_TN_ROBERTA, "--criterion", "mlm_soft_reg"],
    }
    for name, args in runs.items():
        args = [*args, "--max-update", "4"]
        if name == "electra":
            args += ["--update-freq", "2"]
        log_a, a = _train(data_bin, tmp_path / f"{name}_copies", args, True, monkeypatch)
        log_b, b = _train(data_bin, tmp_path / f"{name}_autocast", args, False, monkeypatch)
        assert len(log_a) == 2 and log_a == log_b, name
        assert a["model"].keys() == b["model"].keys()
        for key in a["model"]:
            assert a["model"][key].dtype != torch.bfloat16, key
            assert torch.equal(a["model"][key], b["model"][key]), (name, key)
        state_a = a["last_optimizer_state"]["state"]
        state_b = b["last_optimizer_state"]["state"]
        assert state_a.keys() == state_b.keys()
        for i in state_a:
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(state_a[i][key], state_b[i][key]), (name, i, key)
