"""Static prediction slots (``--mlm-prediction-slots static``): the same losses, counts and
gradients as the dynamic path on the same masks, and no device-to-host synchronisation in the
ELECTRA step (the property that lets the step be compiled and captured on a GPU)."""

import pytest
import torch
from fairseq_runs import TINY_ELECTRA, TINY_TN_ROBERTA, build_components, valid_batch
from objective_cases import electra_criteria, roberta_criteria
from torch.utils._python_dispatch import TorchDispatchMode

from truneg_fairseq.core.selection import MaskSelection, SlotSelection, static_slot_count

ELECTRA_CRITERIA = electra_criteria()
ROBERTA_CRITERIA = roberta_criteria()
# replacements sampled at temperature ~0 are the argmax: the same on both paths
COLD = ["--electra-sample-temperature", "1e-6"]


def run(data_bin, synonym_table, criterion, slots, electra, extra=()):
    args = [
        "--criterion",
        criterion,
        "--synonym-table",
        str(synonym_table),
        "--mlm-prediction-slots",
        slots,
        *extra,
    ]
    if electra:
        task, model, crit = build_components(
            data_bin, [*args, *COLD], arch_args=TINY_ELECTRA, task="electra"
        )
    else:  # static slots are the plugin's forward: its RoBERTa
        task, model, crit = build_components(data_bin, args, arch_args=TINY_TN_ROBERTA)
    model.eval()  # no dropout: both paths see the same network
    sample = valid_batch(task)
    loss, sample_size, log = crit(model, sample)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), sample_size, log, grads


@pytest.mark.parametrize(
    "electra,criterion",
    [(True, c) for c in ELECTRA_CRITERIA] + [(False, c) for c in ROBERTA_CRITERIA],
)
def test_static_slots_equal_dynamic(data_bin, synonym_table, electra, criterion):
    dyn = run(data_bin, synonym_table, criterion, "dynamic", electra)
    sta = run(data_bin, synonym_table, criterion, "static", electra)
    assert int(dyn[1]) == int(sta[1]) > 0
    torch.testing.assert_close(sta[0], dyn[0], rtol=1e-5, atol=1e-5)
    for key, value in dyn[2].items():
        torch.testing.assert_close(
            torch.as_tensor(sta[2][key]).float(),
            torch.as_tensor(value).float(),
            rtol=1e-5,
            atol=1e-5,
            msg=key,
        )
    assert int(sta[2]["slots_dropped"]) == 0
    assert dyn[3].keys() == sta[3].keys()
    for name, g in dyn[3].items():
        torch.testing.assert_close(sta[3][name], g, rtol=1e-4, atol=1e-6, msg=name)


def test_slot_count_follows_electra():
    assert static_slot_count(128, 0.15, None) == 20  # ceil(0.155 * 128)
    assert static_slot_count(512, 0.15, None) == 80
    assert static_slot_count(64, 0.15, 7) == 7
    assert static_slot_count(4, 0.9, None) == 4
    with pytest.raises(ValueError, match="--mlm-max-predictions"):
        static_slot_count(128, None, None)


def test_slots_keep_order_and_count_what_does_not_fit():
    masked = torch.tensor([[0, 1, 0, 1, 1, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    sel = SlotSelection(masked, 2)
    assert sel.positions[:, :2].tolist()[0] == [1, 3]  # first two masked positions, in order
    assert sel.positions[1, 0].item() == 0
    assert int(sel.dropped) == 1  # row 0 had three
    x = torch.arange(12).view(2, 6)
    assert sel.take(x).tolist() == [1, 3, 6, sel.positions[1, 1].item() + 6]
    y = sel.put(torch.zeros(2, 6, dtype=torch.long), torch.tensor([7, 8, 9, 0]))
    assert y[0].tolist() == [0, 7, 0, 8, 0, 0] and y[1, 0].item() == 9
    assert sel.rows_any(torch.tensor([False, True, False, False])).tolist() == [True, False]
    dyn = MaskSelection(masked)
    assert dyn.take(x).tolist() == [1, 3, 4, 6]


def test_too_few_slots_are_counted_not_hidden(data_bin, synonym_table):
    _, _, log, _ = run(
        data_bin,
        synonym_table,
        "mlm_hard_correction",
        "static",
        False,
        ["--mlm-max-predictions", "1"],
    )
    assert int(log["slots_dropped"]) > 0


class OpLog(TorchDispatchMode):
    """Records every aten operator called, and whether an index argument was boolean."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        flat = [a for a in args if isinstance(a, (list, tuple))]
        bool_index = any(
            isinstance(t, torch.Tensor) and t.dtype == torch.bool for lst in flat for t in lst
        )
        self.ops.append((name, bool_index))
        return func(*args, **(kwargs or {}))


SYNCING = {
    "aten.nonzero",
    "aten._local_scalar_dense",
    "aten.masked_select",
    "aten.is_nonzero",
    "aten.item",
}


def step_ops(data_bin, synonym_table, criterion, slots):
    task, model, crit = build_components(
        data_bin,
        [
            "--criterion",
            criterion,
            "--synonym-table",
            str(synonym_table),
            "--mlm-prediction-slots",
            slots,
        ],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    model.train()
    sample = valid_batch(task)
    with OpLog() as log:
        loss, _, out = crit(model, sample)
        loss.backward()
    return log.ops


@pytest.mark.parametrize("criterion", ELECTRA_CRITERIA)
def test_static_electra_step_never_waits_for_the_device(data_bin, synonym_table, criterion):
    ops = step_ops(data_bin, synonym_table, criterion, "static")
    syncing = sorted({name for name, _ in ops if name in SYNCING})
    bool_indexing = sorted({name for name, b in ops if b and name.startswith("aten.index")})
    assert syncing == [] and bool_indexing == []


def test_the_sync_detector_sees_the_dynamic_path(data_bin, synonym_table):
    ops = step_ops(data_bin, synonym_table, "electra", "dynamic")
    assert any(name in SYNCING for name, _ in ops) or any(
        b for name, b in ops if name.startswith("aten.index")
    )
