"""fairseq-validate on checkpoints trained with the plugin's criterions, and batching that scores
every sequence (fairseq 0.12 drops the last batch when it is not a multiple of
--required-batch-size-multiple; truneg_fairseq.compat.remainder_batch keeps it)."""

import copy

import numpy as np
import pytest
import torch
from fairseq_runs import (
    TINY_ELECTRA,
    TINY_ROBERTA,
    TINY_TN_ROBERTA,
    build_components,
    fairseq_train,
    fairseq_validate,
    summary,
    valid_batch,
    valid_blocks,
)


def train(data_bin, save, args):
    table = [] if "masked_lm" in args else ["--synonym-table", "synonyms.npz"]
    fairseq_train(data_bin, save, [*args, *table, "--max-update", "2", "--disable-validation"])
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def roberta_hc(data_bin, synonym_table, tmp_path_factory):
    """fairseq's RoBERTa trained with hard correction (--task masked_lm)."""
    return train(
        data_bin,
        tmp_path_factory.mktemp("val_roberta") / "ckpt",
        [*TINY_ROBERTA, "--criterion", "mlm_hard_correction"],
    )


@pytest.fixture(scope="module")
def electra(data_bin, synonym_table, tmp_path_factory):
    """ELECTRA trained with its own criterion (--task electra)."""
    return train(
        data_bin,
        tmp_path_factory.mktemp("val_electra") / "ckpt",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra"],
    )


def test_validate_roberta_hard_correction(data_bin, synonym_table, roberta_hc):
    proc = fairseq_validate(
        data_bin,
        roberta_hc,
        [
            "--task",
            "masked_lm",
            "--criterion",
            "mlm_hard_correction",
            "--synonym-table",
            str(synonym_table),
        ],
    )
    out = summary(proc)
    for key in ("loss", "mlm_loss", "corrected_loss", "pred_corr_ratio", "iter_corr_ratio"):
        assert key in out, key
    assert 0 < out["loss"] < 20
    assert 0 <= out["pred_corr_ratio"] <= 100 and 0 <= out["iter_corr_ratio"] <= 100
    # fairseq-validate reduces the logging outputs of all batches at once: its bsz is the number
    # of sequences scored, which is every sequence of the split, the remainder of the last batch too
    n = valid_blocks(data_bin, "masked_lm")
    assert n % 8 != 0  # a remainder fairseq 0.12 would drop
    assert out["bsz"] == n


def test_validate_names_the_task_the_checkpoint_was_trained_with(data_bin, synonym_table, tmp_path):
    """A checkpoint of the recipes' task (batch_masked_lm) validated with --task masked_lm: one
    line naming the task to give (not a blame of the file); with that task it is scored; with no
    --task at all: one line saying to give it (fairseq's own is `KeyError: None`)."""
    ckpt = train(
        data_bin,
        tmp_path / "ckpt",
        [*TINY_TN_ROBERTA, "--task", "batch_masked_lm", "--criterion", "mlm_hard_correction"],
    )
    wrong = fairseq_validate(data_bin, ckpt, ["--task", "masked_lm"])
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr, wrong.stderr[-2000:]
    assert (
        f"{ckpt} was trained with --task batch_masked_lm, and this command gives --task "
        "masked_lm"
        in wrong.stderr
        and "give --task batch_masked_lm" in wrong.stderr
    )
    assert "if you made it yourself" not in wrong.stderr
    none = fairseq_validate(data_bin, ckpt, [])
    assert none.returncode == 2 and "Traceback" not in none.stderr, none.stderr[-2000:]
    assert "fairseq-validate: no --task given" in none.stderr and "--task batch_masked_lm" in (
        none.stderr
    )
    ok = fairseq_validate(data_bin, ckpt, ["--task", "batch_masked_lm"])
    assert ok.returncode == 0 and 0 < summary(ok)["loss"] < 20, ok.stderr[-2000:]


def test_validate_electra(data_bin, synonym_table, electra):
    proc = fairseq_validate(
        data_bin,
        electra,
        ["--task", "electra", "--criterion", "electra", "--synonym-table", str(synonym_table)],
    )
    out = summary(proc)
    for key in ("loss", "mlm_loss", "disc_loss", "disc_acc", "pred_corr_ratio", "iter_corr_ratio"):
        assert key in out, key
    assert 0 < out["loss"] < 200
    assert out["bsz"] == valid_blocks(data_bin, "electra")


@pytest.mark.slow
@pytest.mark.parametrize(
    "criterion,arch,terms",
    [
        ("mlm_soft_reg", TINY_TN_ROBERTA, ("mlm_loss", "sr_loss", "pred_corr_ratio")),
        ("mlm_sent_kl", TINY_TN_ROBERTA, ("mlm_loss", "kl_loss", "pred_corr_ratio")),
        ("masked_lm", TINY_ROBERTA, ("loss", "ppl")),  # the baseline: fairseq's own criterion
    ],
    ids=["mlm_soft_reg", "mlm_sent_kl", "masked_lm"],
)
def test_validate_other_criterions(data_bin, synonym_table, tmp_path, criterion, arch, terms):
    ckpt = train(data_bin, tmp_path / "ckpt", [*arch, "--criterion", criterion])
    out = summary(
        fairseq_validate(data_bin, ckpt, ["--task", "masked_lm", "--criterion", criterion])
    )
    for key in terms:
        assert key in out, key
    assert out["bsz"] == valid_blocks(data_bin, "masked_lm")


def test_validate_checkpoint_whose_criterion_config_names_no_arch(data_bin, roberta_hc, tmp_path):
    """A checkpoint saved before the criterion config recorded the arch: fairseq-validate scores it
    with its saved criterion, which decides how to call the model from the model's class."""
    state = torch.load(roberta_hc, map_location="cpu", weights_only=False)
    del state["cfg"]["criterion"]["arch"]  # fairseq saves the config as plain containers
    old = tmp_path / "old.pt"
    torch.save(state, old)
    proc = fairseq_validate(data_bin, old, ["--task", "masked_lm"])
    out = summary(proc)
    assert "the config names no arch; the model is a RobertaModel" in proc.stdout
    assert "pred_corr_ratio" in out and out["bsz"] == valid_blocks(data_bin, "masked_lm")


def _without_arch(crit, task):
    """The same criterion, built from its config with the arch left out."""
    cfg = copy.deepcopy(crit.cfg)  # plain values (models/step_config.py)
    cfg.arch = None
    return type(crit)(cfg, task)


def test_criterion_without_arch_decides_at_its_first_call(synonym_table):
    """The criterion called through a data-parallel wrapper (torch's DataParallel: ``.module``)
    unwraps it, calls it as it would with the arch known and gives the same loss."""
    task, model, crit = build_components(
        synonym_table.parent,
        ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)],
    )
    late = _without_arch(crit, task)
    assert late.fairseq_roberta is None and late.has_discriminator is None
    model.eval()
    sample = valid_batch(task)
    loss, _, log = crit(model, sample)
    late_loss, _, late_log = late(torch.nn.DataParallel(model), sample)
    assert late.fairseq_roberta is True and late.has_discriminator is False
    torch.testing.assert_close(late_loss, loss)
    assert late_log["fn_synonym"] == log["fn_synonym"]


def test_criterion_without_arch_refuses_a_model_it_cannot_train(synonym_table):
    """The build-time error, at the first call: soft regularisation needs the plugin's forward."""
    task, _, crit = build_components(
        synonym_table.parent,
        ["--criterion", "mlm_soft_reg", "--synonym-table", str(synonym_table)],
        arch_args=TINY_TN_ROBERTA,
    )
    _, fairseq_roberta, _ = build_components(
        synonym_table.parent,
        ["--criterion", "mlm_hard_correction", "--synonym-table", str(synonym_table)],
    )
    late = _without_arch(crit, task)
    with pytest.raises(
        ValueError,
        match="--criterion mlm_soft_reg needs the model's forward .* "
        "Use --arch truneg_roberta_base",
    ):
        late(fairseq_roberta, valid_batch(task))


# ---- every sequence batched ------------------------------------------------------------------


@pytest.mark.parametrize("vec", [False, True], ids=["num_tokens_fn", "num_tokens_vec"])
def test_batch_by_size_keeps_the_remainder(vec):
    from fairseq.data import data_utils

    import truneg_fairseq  # noqa: F401  (the shims)

    sizes = np.full(12, 10, dtype=np.int64)
    kw = dict(num_tokens_vec=sizes) if vec else {}
    fairseq_own = data_utils.batch_by_size.__wrapped__(
        np.arange(12), lambda i: 10, max_sentences=8, required_batch_size_multiple=8, **kw
    )
    assert [len(b) for b in fairseq_own] == [8]  # fairseq 0.12 drops the 4 left over
    batches = data_utils.batch_by_size(
        np.arange(12), lambda i: 10, max_sentences=8, required_batch_size_multiple=8, **kw
    )
    assert [len(b) for b in batches] == [8, 4]
    assert np.concatenate(batches).tolist() == list(range(12))
    # fewer sequences than one full batch, a multiple, and a token budget: nothing lost
    assert [
        len(b)
        for b in data_utils.batch_by_size(
            range(4), lambda i: 10, max_sentences=8, required_batch_size_multiple=8
        )
    ] == [4]
    assert [
        len(b)
        for b in data_utils.batch_by_size(
            np.arange(16), lambda i: 10, max_sentences=8, required_batch_size_multiple=8
        )
    ] == [8, 8]
    budget = data_utils.batch_by_size(
        np.arange(21),
        None,
        num_tokens_vec=np.arange(21) * 10 + 5,
        max_tokens=400,
        required_batch_size_multiple=8,
    )
    assert np.concatenate(budget).tolist() == list(range(21))
    assert all(sum(i * 10 + 5 for i in b) <= 400 for b in budget)


@pytest.mark.parametrize("split", ["valid", "train"])
def test_task_batch_iterator_scores_every_sequence(data_bin, split):
    """The masked-LM task's batches cover each sequence of the split once (valid: as fairseq-train's
    validation and fairseq-validate batch it; train: an epoch)."""
    task, _, _ = build_components(data_bin, ["--criterion", "masked_lm"])
    task.load_dataset(split)
    ds = task.dataset(split)
    assert len(ds) % 8 != 0
    itr = task.get_batch_iterator(
        dataset=ds, max_sentences=8, required_batch_size_multiple=8
    ).next_epoch_itr(shuffle=split == "train")
    ids = [i for batch in itr for i in batch["id"].tolist()]
    assert sorted(ids) == list(range(len(ds)))
