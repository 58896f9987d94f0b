"""Training statistics summed on the device and reduced once per --log-interval
(truneg_fairseq/training/device_stats.py): the same log as reducing every update, and no
host-device synchronisation from the statistics inside an update."""

import json
import re
import traceback

import pytest
import torch
from fairseq_runs import (
    BATCH,
    TINY_ELECTRA,
    TINY_ROBERTA,
    TINY_TN_ROBERTA,
    fairseq_train,
    fairseq_validate,
    summary,
    valid_blocks,
)
from torch.utils._python_dispatch import TorchDispatchMode

from truneg_fairseq.criterions.cfn_base import CounterFalseNegativeLoss

RUNS = {
    "roberta_hc": [*TINY_ROBERTA, "--criterion", "mlm_hard_correction"],
    # the recipes' optimizer: the update itself does not wait for the device either
    "electra": [
        *TINY_ELECTRA,
        "--task",
        "electra",
        "--criterion",
        "electra",
        "--optimizer",
        "fused_adamw",
    ],  # fmt: skip
}
COMMON = [
    "--synonym-table",
    "synonyms.npz",
    "--max-update",
    "7",
    "--log-interval",
    "3",
    "--log-format",
    "json",
    "--disable-validation",
    "--clip-norm",
    "0.5",
]
# time-dependent, or fairseq's own clock
TIMED = {"wps", "ups", "wall", "train_wall", "gb_free"}


class SyncCounter(TorchDispatchMode):
    """Every op that makes the host wait for a device value, with the Python stack it came from."""

    SYNCS = {"_local_scalar_dense", "nonzero", "item", "is_nonzero"}

    def __init__(self):
        super().__init__()
        self.sites = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in self.SYNCS:
            stack = traceback.extract_stack()[:-1]
            self.sites.append([f"{f.filename}:{f.lineno} {f.name}" for f in stack])
        return func(*args, **(kwargs or {}))


def _stats(stdout: str):
    """The JSON train_inner and train lines of fairseq's log, timed values left out."""
    out = []
    for line in stdout.splitlines():
        start = line.find("{")
        if start < 0 or '"epoch"' not in line:
            continue
        try:
            record = json.loads(line[start:])
        except ValueError:
            continue
        out.append({k: v for k, v in record.items() if k.split("_", 1)[-1] not in TIMED})
    return out


def _same(a, b):
    assert len(a) == len(b) and len(a) >= 3, (a, b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys(), (sorted(x), sorted(y))
        for key in x:
            fx, fy = float(x[key]), float(y[key])
            assert fx == pytest.approx(fy, rel=2e-3, abs=2e-3), (key, x[key], y[key])


@pytest.mark.parametrize("kind", sorted(RUNS))
def test_the_log_is_the_same_and_updates_do_not_wait_for_statistics(
    kind, data_bin, synonym_table, tmp_path, monkeypatch
):
    from fairseq.trainer import Trainer

    args = [*RUNS[kind], *COMMON]
    step = Trainer.train_step
    per_update = []

    def counted_step(self, samples, *a, **kw):
        with SyncCounter() as counter:
            out = step(self, samples, *a, **kw)
        per_update.append((self.get_num_updates(), counter.sites, out))
        return out

    monkeypatch.setattr(Trainer, "train_step", counted_step)
    fast = fairseq_train(data_bin, tmp_path / "fast", args)
    monkeypatch.setattr(Trainer, "train_step", step)

    # every update between two logs: no sync from the statistics; the plugin's ELECTRA with
    # fused_adamw (training/fast_update.py) has none at all. fairseq's RoBERTa encoder asks
    # whether there is padding, and fairseq's own update of adam waits twice.
    between = [sites for n, sites, _ in per_update if n % 3 != 0]
    assert len(between) >= 4
    statistics = ("reduce_metrics", "_reduce_and_log_stats", "criterions/logs.py")
    for sites in between:
        for stack in sites:
            assert not any(s in f for f in stack for s in statistics), "\n".join(stack[-12:])
            if kind == "electra":
                assert not any("truneg_fairseq" in f for f in stack), "\n".join(stack[-12:])
        if kind == "electra":
            assert not sites, [s[-3:] for s in sites]
    if kind == "electra":
        assert "training updates: without host-device synchronisation" in fast.stdout + fast.stderr

    # what train_step returns still holds the update's statistics when read (read after the
    # counting: reading it is what syncs)
    returned = [out for _, _, out in per_update]
    assert all(0 < float(out["loss"]) < 1e4 and "sample_size" in out for out in returned), [
        float(out["loss"]) for out in returned
    ]

    # the reference: every update reduced on its own, as fairseq does
    monkeypatch.setattr(CounterFalseNegativeLoss, "summed_statistics", False)
    each = fairseq_train(data_bin, tmp_path / "each", args)
    fast_stats, each_stats = _stats(fast.stdout), _stats(each.stdout)
    _same(fast_stats, each_stats)
    assert any("gnorm" in s and "clip" in s for s in fast_stats)
    if kind == "electra":
        assert any("disc_acc" in s for s in fast_stats)
    else:
        assert any("pred_corr_ratio" in s or "syn_acc" in s for s in fast_stats)

    # the checkpoints' meter state holds every update too
    def meters(path):
        state = torch.load(path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        train = state["extra_state"]["metrics"][
            "train"
        ]  # MetersDict: (priority, key, class, state)
        return {key: m["sum"] for _, key, _, m in train if "sum" in m and key not in TIMED}

    a, b = meters(tmp_path / "fast"), meters(tmp_path / "each")
    assert a.keys() == b.keys()
    for key in a:
        assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-4, abs=1e-6), key

    # and the same weights and optimizer state after the updates (ELECTRA: the fast update
    # against fairseq's own, which the reference run takes)
    if kind == "electra":
        assert "training updates: fairseq's" in each.stdout + each.stderr
    load = lambda d: torch.load(d / "checkpoint_last.pt", map_location="cpu", weights_only=False)  # noqa: E731
    wa, wb = load(tmp_path / "fast"), load(tmp_path / "each")
    assert wa["model"].keys() == wb["model"].keys()
    for key in wa["model"]:
        torch.testing.assert_close(wa["model"][key], wb["model"][key], rtol=1e-5, atol=1e-6)
    assert wa["optimizer_history"][-1]["num_updates"] == wb["optimizer_history"][-1]["num_updates"]


# every criterion whose training statistics are summed on the device
SUMMED_RUNS = {
    "mlm_plain": [*TINY_ROBERTA, "--criterion", "mlm_plain"],
    "mlm_hard_correction": [*TINY_ROBERTA, "--criterion", "mlm_hard_correction"],
    "mlm_soft_reg": [*TINY_TN_ROBERTA, "--criterion", "mlm_soft_reg"],
    "mlm_sent_kl": [*TINY_TN_ROBERTA, "--criterion", "mlm_sent_kl"],
    "electra": [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra"],
}


def _valid_lines(stdout: str):
    """The (num_updates, metrics) of fairseq's ``valid on 'valid' subset`` lines (simple format)."""
    out = []
    for line in stdout.splitlines():
        if "valid on 'valid' subset" not in line:
            continue
        values = dict(re.findall(r"\| (\w+) ([-\d.e]+)", line.split("subset", 1)[1]))
        out.append((int(values["num_updates"]), {k: float(v) for k, v in values.items()}))
    return out


@pytest.mark.parametrize("criterion", sorted(SUMMED_RUNS))
def test_validation_between_two_logs_measures_only_the_valid_set(
    criterion, data_bin, synonym_table, tmp_path
):
    """Validations at updates 3, 6 and 8 while the log comes every 5 updates: the training
    updates summed since the last log stay out of the valid meters, so every valid line counts
    the valid set's sequences and its numbers are those fairseq-validate gives for the
    checkpoint written right after the last one."""
    task = "electra" if criterion == "electra" else "masked_lm"
    blocks = valid_blocks(data_bin, task)
    run = fairseq_train(
        data_bin,
        tmp_path / "ckpt",
        [
            *SUMMED_RUNS[criterion],
            "--synonym-table",
            "synonyms.npz",
            "--max-update",
            "8",
            "--log-interval",
            "5",
            "--validate-interval-updates",
            "3",
            "--save-interval-updates",
            "8",
            *BATCH,
        ],
    )
    valid = _valid_lines(run.stdout)
    assert [n for n, _ in valid] == [3, 6, 8], run.stdout[-3000:]
    for n, values in valid:
        assert values["nseq"] == blocks, (n, values)
    last = valid[-1][1]
    checkpoint = tmp_path / "ckpt" / "checkpoint_last.pt"
    again = summary(fairseq_validate(data_bin, checkpoint, ["--task", task]))
    assert again["nseq"] == blocks
    # the logged values are rounded (ELECTRA's loss is 50 x a 4-decimal disc_loss + ...)
    for key in ("loss", "mlm_loss", "mlm_acc", "disc_loss"):
        if key in last:
            assert again[key] == pytest.approx(last[key], rel=5e-4, abs=2e-3), (key, again, last)
    assert last.keys() <= again.keys() | {"num_updates", "best_loss", "wps", "wpb", "bsz"}
