"""The baselines with the false-negative statistics: ``mlm_plain`` trains exactly as fairseq's
``masked_lm`` and ``electra`` with a synonym table exactly as without one, while both log
``syn_acc``, ``pred_corr_ratio`` and ``iter_corr_ratio`` (non-zero where the model predicts
synonyms), on one batch and through real fairseq-train updates."""

import json

import pytest
import torch
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
from fairseq_runs import (
    TINY_ELECTRA,
    TINY_ROBERTA,
    TINY_TN_ROBERTA,
    build_components,
    fairseq_train,
    force_prediction,
    model_state,
    valid_batch,
)
from finetune_flags import RESET
from step_checks import loss_and_grads

GOLD, SYNONYM = "\u2581primary", "\u2581main"


def predict_a_synonym(task, sample, bias: torch.Tensor):
    """Every masked gold entry made '▁primary' and the head's bias made to predict '▁main', a
    WordNet synonym of it (a logit of 50 outweighs W.h, |W.h| < 10 in the tiny models)."""
    d = task.source_dictionary
    target = sample["target"]
    target[target.ne(d.pad())] = d.index(GOLD)
    with torch.no_grad():
        bias.zero_()
        bias[d.index(SYNONYM)] = 50.0


@pytest.mark.parametrize(
    "arch,slots",
    [(TINY_ROBERTA, "dynamic"), (TINY_TN_ROBERTA, "static")],
    ids=["fairseq_roberta", "truneg_roberta_static"],
)
def test_mlm_plain_is_fairseq_masked_lm_while_it_counts_synonyms(
    data_bin, synonym_table, arch, slots
):
    task, model, plain = build_components(
        data_bin,
        [
            "--criterion",
            "mlm_plain",
            "--synonym-table",
            str(synonym_table),
            "--mlm-prediction-slots",
            slots,
        ],
        arch_args=arch,
    )
    model.eval()  # no dropout: both passes see the same network
    sample = valid_batch(task)
    predict_a_synonym(task, sample, model.encoder.lm_head.bias)
    ref = MaskedLmLoss(MaskedLmConfig(tpu=False), task)

    loss_ref, ss_ref, _, g_ref = loss_and_grads(ref, model, sample)
    loss, ss, log, g = loss_and_grads(plain, model, sample)

    assert int(ss_ref) == int(ss) > 0
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=0)
    assert g.keys() == g_ref.keys()
    for n in g_ref:
        torch.testing.assert_close(g[n], g_ref[n], rtol=1e-5, atol=1e-7, msg=n)
    # the synonym predictions are counted, and stay in the loss (hard correction drops them)
    assert int(log["fn_synonym"]) > 0 and int(log["fn_synonym_sequences"]) > 0
    assert float(log["mlm_loss"]) == pytest.approx(float(loss))
    assert set(log) >= {"fn_masked", "fn_correct", "fn_synonym", "fn_content", "fn_sequences"}


def test_electra_with_a_table_is_electra_without_one(data_bin, synonym_table):
    task, model, crit = build_components(
        data_bin,
        ["--criterion", "electra", "--synonym-table", str(synonym_table)],
        arch_args=TINY_ELECTRA,
        task="electra",
    )
    model.eval()
    sample = valid_batch(task)
    predict_a_synonym(task, sample, model.generator_bias)
    lookup = crit.lookup

    def step(table):
        crit.lookup = table
        torch.manual_seed(5)  # the generator's samples: the same draws in both steps
        return loss_and_grads(crit, model, sample)

    without = step(None)
    with_table = step(lookup)
    assert torch.equal(with_table[0], without[0]) and int(with_table[1]) == int(without[1])
    for n, g in without[3].items():
        assert torch.equal(with_table[3][n], g), n
    for k, v in without[2].items():
        assert torch.equal(torch.as_tensor(with_table[2][k]), torch.as_tensor(v)), k
    log = with_table[2]
    assert "fn_synonym" not in without[2]
    assert int(log["fn_synonym"]) > 0 and int(log["rtd_synonym"]) > 0


def json_log(stdout: str, kind: str):
    """The values of fairseq's ``--log-format json`` lines of ``kind`` (train_inner, valid),
    under their names without the ``valid_`` prefix."""
    tag, prefix = f"| {kind} | ", f"{kind}_" if kind == "valid" else ""
    rows = [json.loads(line.split(tag, 1)[1]) for line in stdout.splitlines() if tag in line]
    return [
        {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in r.items()} for r in rows
    ]


def same_updates(a: str, b: str, with_stats: str) -> dict:
    """The losses of two fairseq-train logs, update by update and on the valid set, are the
    same; the ratios of ``with_stats`` (one of them) are there and not all 0. Returns its last
    valid values."""
    for kind in ("train_inner", "valid"):
        rows_a, rows_b = json_log(a, kind), json_log(b, kind)
        assert len(rows_a) == len(rows_b) > 0, kind
        for ra, rb in zip(rows_a, rows_b):
            assert float(ra["loss"]) == pytest.approx(float(rb["loss"]), abs=1e-3), kind
    inner, valid = json_log(with_stats, "train_inner"), json_log(with_stats, "valid")[-1]
    for row in (*inner, valid):
        for key in ("syn_acc", "pred_corr_ratio", "iter_corr_ratio", "mlm_acc"):
            assert key in row, (key, row)
    for key in ("pred_corr_ratio", "iter_corr_ratio"):
        assert any(float(r[key]) > 0 for r in inner), key
        assert float(valid[key]) > 0, (key, valid)
    assert float(valid["syn_acc"]) > float(valid["mlm_acc"])
    return valid


def same_weights(a, b):
    wa, wb = model_state(a), model_state(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch", [TINY_ROBERTA, TINY_TN_ROBERTA], ids=["fairseq_roberta", "truneg_roberta"]
)
def test_mlm_plain_trains_as_masked_lm_and_logs_the_ratios(
    data_bin, synonym_table, plain_checkpoint, tmp_path, arch
):
    """Three updates of each from a RoBERTa that predicts '▁main' everywhere (so the masked
    '▁primary', '▁chief', '▁principal' are synonym predictions): the same losses and the same
    weights to the bit, and only mlm_plain's log holds the ratios."""
    start = force_prediction(plain_checkpoint, data_bin, SYNONYM, tmp_path / "main.pt")
    common = [*arch, "--max-update", "3", "--log-format", "json", "--restore-file", str(start)]
    common += RESET
    ref = fairseq_train(data_bin, tmp_path / "ref", [*common, "--criterion", "masked_lm"])
    run = fairseq_train(
        data_bin,
        tmp_path / "plain",
        [*common, "--criterion", "mlm_plain", "--synonym-table", "synonyms.npz"],
    )
    assert not any("pred_corr_ratio" in r for r in json_log(ref.stdout, "train_inner"))
    same_updates(ref.stdout, run.stdout, run.stdout)
    same_weights(tmp_path / "ref" / "checkpoint_last.pt", tmp_path / "plain" / "checkpoint_last.pt")


@pytest.fixture(scope="module")
def electra_predicting_a_synonym(data_bin, tmp_path_factory):
    """A tiny ELECTRA after one update whose generator predicts '▁main' everywhere."""
    from fairseq.data import Dictionary

    save = tmp_path_factory.mktemp("electra_start") / "run"
    fairseq_train(
        data_bin,
        save,
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "1"],
    )
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    bias = state["model"]["generator_bias"]
    bias.zero_()
    bias[Dictionary.load(str(data_bin / "dict.txt")).index(SYNONYM)] = 1000.0
    torch.save(state, save / "main.pt")
    return save / "main.pt"


@pytest.mark.slow
def test_electra_with_a_table_trains_as_without_and_logs_the_ratios(
    data_bin, synonym_table, electra_predicting_a_synonym, tmp_path
):
    common = [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "3"]
    common += ["--log-format", "json", "--restore-file", str(electra_predicting_a_synonym)]
    common += RESET
    ref = fairseq_train(data_bin, tmp_path / "ref", common)
    run = fairseq_train(data_bin, tmp_path / "table", [*common, "--synonym-table", "synonyms.npz"])
    assert not any("pred_corr_ratio" in r for r in json_log(ref.stdout, "train_inner"))
    assert "without --synonym-table: syn_acc, pred_corr_ratio" in ref.stdout
    valid = same_updates(ref.stdout, run.stdout, run.stdout)
    assert float(valid["rtd_synonym"]) > 0
    same_weights(tmp_path / "ref" / "checkpoint_last.pt", tmp_path / "table" / "checkpoint_last.pt")


def test_the_study_and_the_demo_train_their_baselines_with_the_table(tmp_path):
    """Stage 1 and the baseline's continuation of every family log the ratios: mlm_plain for
    RoBERTa (the demo's too) and electra, each given the synonym table; fairseq's own masked_lm,
    named by hand, still runs without one."""
    from truneg_fairseq.cli.demo import DEMO_CRITERIA
    from truneg_fairseq.pipelines.study.pipeline import StudyConfig, study_setting
    from truneg_fairseq.pipelines.study.train import train_command

    setting = study_setting(StudyConfig(scale="tiny", roberta_criteria=["mlm_plain", "masked_lm"]))
    baselines = {f.name: f.baseline for f in setting.families}
    assert baselines == {"roberta": "mlm_plain", "electra": "electra"}
    assert DEMO_CRITERIA[0] == "mlm_plain"
    for fam in setting.families:
        for crit, stage in [(fam.baseline, 1), *((c, 2) for c in fam.criteria)]:
            cmd = train_command(
                setting, fam, crit, "DATA", "TABLE.npz", str(tmp_path / crit), stage
            )
            assert cmd[cmd.index("--criterion") + 1] == crit
            assert ("--synonym-table" in cmd) == (crit != "masked_lm"), (fam.name, crit)
