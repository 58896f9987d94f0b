"""Runs that went on with the wrong input, or ended in a traceback, each now refused with one
clear error: fairseq-train resumed from a truncated checkpoint, from one of other sizes, with
another criterion or another synonym table; synonym tables of 0 pairs; raw text that is not
UTF-8; a checkpoint naming an activation fairseq does not know; a byte-order mark in a GLUE
header."""

import shutil

import pytest
import torch
from utils import TINY_ROBERTA, fairseq_train, run_script

HC = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--synonym-table", "synonyms.npz"]


@pytest.fixture(scope="module")
def hc_run(data_bin, synonym_table, tmp_path_factory):
    """A hard-correction run of one update: its save directory."""
    save = tmp_path_factory.mktemp("hc") / "run"
    fairseq_train(data_bin, save, [*HC, "--max-update", "1"])
    return save


def _copy(run, tmp_path):
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def _one_error(proc, *wanted):
    """The one ERROR line of fairseq's log format a refused fairseq-train ends with."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [
        line for line in proc.stderr.splitlines() if " | ERROR | fairseq_cli.train | " in line
    ]
    assert len(errors) == 1, proc.stderr[-3000:]
    for w in wanted:
        assert w in errors[0], errors[0]
    return errors[0]


# ---- resuming fairseq-train ----------------------------------------------------------------


def test_every_checkpoint_records_its_synonym_table(hc_run, synonym_table):
    from truneg_fairseq.lexicon import SynonymTable

    state = torch.load(hc_run / "checkpoint_last.pt", weights_only=False)
    record = state["extra_state"]["truneg_records"]["criterion"]["synonym_table"]
    table = SynonymTable.load(synonym_table)
    assert record["fingerprint"] == table.content_fingerprint()
    assert record["pairs"] == len(table) > 0 and record["path"] == str(synonym_table)


def test_resuming_from_a_truncated_checkpoint_last_is_one_error(hc_run, data_bin, tmp_path):
    run = _copy(hc_run, tmp_path)
    last = run / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 3])
    proc = fairseq_train(data_bin, run, [*HC, "--max-update", "2"], check=False)
    _one_error(proc, f"{last} is not a readable checkpoint: truncated", "--restore-file")


def test_resuming_with_other_sizes_is_one_error_naming_the_flag(hc_run, data_bin, tmp_path):
    run = _copy(hc_run, tmp_path)
    args = [*HC, "--max-update", "2"]
    for flags, said in (
        (["--encoder-layers", "3"], "--encoder-layers 2 there, 3 here"),
        (["--encoder-ffn-embed-dim", "48"], "--encoder-ffn-embed-dim 64 there, 48 here"),
    ):
        proc = fairseq_train(data_bin, run, [*args, *flags], check=False)
        _one_error(proc, f"{run / 'checkpoint_last.pt'} does not fit the model built here", said)


def test_resuming_on_data_of_another_dictionary_is_one_error(hc_run, tmp_path):
    from utils import make_corpus, tiny_corpus_lines

    run = _copy(hc_run, tmp_path)
    other = make_corpus(tmp_path / "other", tiny_corpus_lines(300, seed=5), vocab_size=120)
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    proc = fairseq_train(other, run, args, check=False)
    _one_error(
        proc,
        f"{run / 'checkpoint_last.pt'} was trained with another dictionary than {other}/dict.txt",
        "give the data directory it was trained on",
    )


def test_resuming_with_another_criterion_is_one_error(hc_run, data_bin, tmp_path):
    run = _copy(hc_run, tmp_path)
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    proc = fairseq_train(data_bin, run, args, check=False)
    _one_error(
        proc,
        f"{run / 'checkpoint_last.pt'} was saved by a run with the criterion HardCorrectionLoss; "
        "this run's is MaskedLmLoss",
        "--reset-optimizer",
    )


def _other_table(synonym_table, path, drop=1):
    from truneg_fairseq.lexicon import SynonymTable

    table = SynonymTable.load(synonym_table)
    table.pairs = table.pairs[drop:]
    table.save(path)
    return path


def test_resuming_with_another_synonym_table_is_refused_unless_asked(
    hc_run, data_bin, synonym_table, tmp_path
):
    run = _copy(hc_run, tmp_path)
    other = _other_table(synonym_table, tmp_path / "other.npz")
    args = [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--max-update", "2"]
    proc = fairseq_train(data_bin, run, [*args, "--synonym-table", str(other)], check=False)
    _one_error(
        proc,
        f"{run / 'checkpoint_last.pt'} was trained with the synonym table {synonym_table}",
        f"this run gives the synonym table {other}",
        "--synonym-reset-table",
    )
    # the same content under another name is the same table
    same = tmp_path / "copy.npz"
    shutil.copy(synonym_table, same)
    fairseq_train(data_bin, run, [*args, "--synonym-table", str(same)])
    proc = fairseq_train(
        data_bin,
        run,
        [*args[:-1], "3", "--synonym-table", str(other), "--synonym-reset-table"],
    )
    assert "--synonym-reset-table: " in proc.stdout and "num_updates 3" in proc.stdout
    state = torch.load(run / "checkpoint_last.pt", weights_only=False)
    assert state["extra_state"]["truneg_records"]["criterion"]["synonym_table"]["path"] == str(
        other
    )


def test_the_reset_flag_is_in_the_help():
    from truneg_fairseq.cli.train_help import training_help

    text = " ".join(
        training_help(
            ["--task", "masked_lm", "--arch", "roberta_base", "--criterion", "mlm_hard_correction"]
        ).split()
    )
    assert "--synonym-reset-table resume from a checkpoint trained with another" in text


# ---- synonym tables of 0 pairs -------------------------------------------------------------


def _empty_table(data_bin, path):
    from fairseq.data import Dictionary

    from truneg_fairseq.lexicon import SynonymTable

    d = Dictionary.load(str(data_bin / "dict.txt"))
    SynonymTable.empty(d.symbols).save(path)
    return path


@pytest.mark.parametrize(
    "criterion, extra, needs",
    [
        ("mlm_hard_correction", [], "--criterion mlm_hard_correction"),
        (
            "electra",
            ["--electra-rtd-synonym-policy", "original"],
            "--electra-rtd-synonym-policy original",
        ),
    ],
)
def test_a_table_of_no_pairs_is_refused_where_pairs_are_needed(
    data_bin, tmp_path, criterion, extra, needs
):
    from utils import TINY_ELECTRA, build_components

    from truneg_fairseq.lexicon import SynonymTableError

    table = _empty_table(data_bin, tmp_path / "empty.npz")
    arch, task = (
        (TINY_ROBERTA, "masked_lm") if criterion != "electra" else (TINY_ELECTRA, "electra")
    )
    with pytest.raises(SynonymTableError) as e:
        build_components(
            data_bin,
            ["--criterion", criterion, "--synonym-table", str(table), *extra],
            arch_args=arch,
            task=task,
        )
    assert f"synonym table {table} holds 0 pairs" in str(e.value)
    assert f"{needs} would train as plain masked LM" in str(e.value)


@pytest.mark.parametrize("criterion", ["mlm_soft_reg", "mlm_sent_kl"])
def test_a_table_of_no_pairs_is_warned_about_where_it_only_counts(
    data_bin, tmp_path, caplog, criterion
):
    from utils import TINY_TN_ROBERTA, build_components

    table = _empty_table(data_bin, tmp_path / "empty.npz")
    with caplog.at_level("WARNING"):
        build_components(
            data_bin,
            ["--criterion", criterion, "--synonym-table", str(table)],
            arch_args=TINY_TN_ROBERTA,
        )
    assert f"synonym table {table} holds 0 pairs" in caplog.text
    assert "every synonym statistic is 0" in caplog.text


def test_building_a_table_of_no_pairs_warns(tmp_path, wn, caplog):
    from truneg_fairseq.lexicon import build_table, vocab_view

    d = tmp_path / "dict.txt"  # words none of which is a synonym of another
    d.write_text("".join(f"{w} 1\n" for w in ("farmer", "lake", "blue", "quickly", "xqzv")))
    view = vocab_view(d, "whitespace")
    with caplog.at_level("WARNING"):
        table, _ = build_table(view, source="wordnet", wn=wn)
    assert len(table) == 0
    assert "the synonym table holds 0 pairs: none of the 5 candidate entries" in caplog.text


# ---- evaluate_mlm -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from hf_fixtures import save_bert

    from truneg_fairseq.convert.hf import import_hf

    root = tmp_path_factory.mktemp("hf3")
    save_bert(root / "bert")
    return import_hf(root / "bert", root / "imported")


def test_evaluate_mlm_on_latin1_text_is_one_error_naming_the_line(imported, tmp_path):
    text = tmp_path / "latin1.txt"
    text.write_bytes("the farmer will stay .\nthe caf\xe9 is big .\n".encode("latin-1"))
    proc = run_script("evaluate_mlm.py", ["--text", str(text), str(imported / "model.pt")])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"--text {text}, line 2: not UTF-8" in proc.stderr and "iconv" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def electra_discriminator(tmp_path_factory):
    from hf_fixtures import save_electra_pair

    from truneg_fairseq.convert.hf import import_hf

    root = tmp_path_factory.mktemp("el3")
    save_electra_pair(root / "disc", root / "gen")
    return import_hf(root / "disc", root / "imported")


@pytest.mark.parametrize(
    "source, field",
    [("imported", "activation_fn"), ("electra_discriminator", "electra_activation_fn")],
)
def test_evaluate_mlm_on_an_unknown_activation_is_one_error(request, tmp_path, source, field):
    imported = request.getfixturevalue(source)
    state = torch.load(imported / "model.pt", weights_only=False)
    model = state["cfg"]["model"]
    if isinstance(model, dict):
        model[field] = "swishy"
    else:
        setattr(model, field, "swishy")  # a legacy model: an argparse namespace
    ck = tmp_path / "model.pt"
    torch.save(state, ck)
    proc = run_script("evaluate_mlm.py", ["--data", str(imported), str(ck)])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{ck} records the activation function 'swishy', which fairseq does not know" in (
        proc.stderr
    )
    assert "gelu" in proc.stderr and "Traceback" not in proc.stderr


# ---- GLUE headers -------------------------------------------------------------------------


def test_a_bom_before_a_needed_glue_column_is_said_in_words(tmp_path):
    from truneg_fairseq.data.glue import TASKS, read_split_counted
    from truneg_fairseq.errors import CorpusError

    path = tmp_path / "train.tsv"
    path.write_text("\ufeffsentence\tlabel\nthe farmer will stay .\t1\n", encoding="utf-8")
    with pytest.raises(CorpusError) as e:
        read_split_counted(TASKS["SST-2"], path)
    msg = str(e.value)
    assert f"{path}: the file starts with a byte-order mark (BOM)" in msg
    assert "\ufeff" not in msg and "header: sentence, label" in msg
    # a BOM before a column the task does not read is no error
    rte = tmp_path / "rte.tsv"
    rte.write_text(
        "\ufeffindex\tsentence1\tsentence2\tlabel\n0\ta b .\tc d .\tentailment\n", encoding="utf-8"
    )
    exs, _ = read_split_counted(TASKS["RTE"], rte)
    assert len(exs) == 1 and exs[0].label == "entailment"


def test_a_bom_before_a_needed_column_of_a_perturbed_or_contrast_file_is_said_in_words(tmp_path):
    from truneg_fairseq.data.glue import TASKS
    from truneg_fairseq.data.perturb import column_index
    from truneg_fairseq.errors import CorpusError
    from truneg_fairseq.evaluation.contrast import read_contrast_tsv

    with pytest.raises(CorpusError) as e:
        column_index("\ufeffsentence\tlabel", "sentence", "dev.tsv", TASKS["SST-2"])
    assert "dev.tsv: the file starts with a byte-order mark (BOM)" in str(e.value)
    assert "\ufeff" not in str(e.value)
    tsv = tmp_path / "contrast.tsv"
    tsv.write_text("\ufeffpair_id\tsentence\tlabel\np1\ta b .\t1\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        read_contrast_tsv(str(tsv), "pair_id", "label")
    assert "no column 'pair_id' (--pair-column) (the file starts with a byte-order mark, BOM" in (
        str(e.value)
    )
    assert "\ufeff" not in str(e.value) and "header is: pair_id, sentence, label" in str(e.value)


# ---- GLUE predictions on other data ---------------------------------------------------------

GLUE_TASKS = ("SST-2", "RTE", "MNLI", "STS-B")


@pytest.fixture(scope="module")
def glue_bin(corpus_dir, data_bin, tmp_path_factory):
    from glue_fixtures import write_glue

    root = tmp_path_factory.mktemp("glue3")
    glue = write_glue(root / "glue", n_train=16, n_dev=8)
    out = root / "glue-bin"
    spm = ["--tokenizer", "sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    proc = run_script(
        "prepare_glue.py",
        ["--glue-dir", str(glue), "--output-dir", str(out), "--tasks", *GLUE_TASKS]
        + ["--dict", str(data_bin / "dict.txt"), *spm],
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def sst2_checkpoint(glue_bin, tmp_path_factory):
    """fairseq-train's sentence_prediction on SST-2, one update: checkpoint_last.pt."""
    save = tmp_path_factory.mktemp("sst2") / "run"
    fairseq_train(
        glue_bin / "SST-2",
        save,
        [*TINY_ROBERTA[:-2], "--task", "sentence_prediction", "--criterion", "sentence_prediction"]
        + [
            "--num-classes",
            "2",
            "--init-token",
            "0",
            "--separator-token",
            "2",
            "--max-update",
            "1",
        ],
    )
    return save / "checkpoint_last.pt"


def _predict(checkpoint, data, out):
    return run_script(
        "glue_predict.py",
        [str(checkpoint), "--data", str(data), "--output", str(out), "--device", "cpu"],
    )


def _labels_of(data):
    lines = (data / "label" / "dict.txt").read_text().splitlines()
    return [line.split()[0] for line in lines if not line.startswith("madeupword")]


def test_a_finetuned_checkpoint_records_its_labels_and_task(sst2_checkpoint, glue_bin, tmp_path):
    state = torch.load(sst2_checkpoint, weights_only=False)
    record = state["extra_state"]["truneg_records"]["sentence_prediction"]
    assert record["labels"] == _labels_of(glue_bin / "SST-2") and record["data_task"] == "SST-2"
    proc = _predict(sst2_checkpoint, glue_bin / "SST-2", tmp_path / "pred.txt")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set((tmp_path / "pred.txt").read_text().split()) <= {"0", "1"}


def test_a_full_disk_while_writing_predictions_is_one_error_and_no_file(
    sst2_checkpoint, glue_bin, tmp_path
):
    from test_errors_round2 import _full_disk_run

    out = tmp_path / "out" / "pred.txt"
    out.parent.mkdir()
    argv = [sst2_checkpoint, "--data", glue_bin / "SST-2", "--device", "cpu", "--output", out]
    proc = _full_disk_run("glue_predict.py", argv, out, 4)
    assert f"error: --output {out}" in proc.stderr


@pytest.mark.parametrize("task", ["RTE", "MNLI", "STS-B"])
def test_a_checkpoint_on_another_tasks_data_is_one_error(sst2_checkpoint, glue_bin, tmp_path, task):
    proc = _predict(sst2_checkpoint, glue_bin / task, tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        f"{sst2_checkpoint} on --data {glue_bin / task}: the checkpoint was fine-tuned on SST-2 "
        in (proc.stderr)
    )
    assert f"the data directory holds {task}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "pred.txt").exists()


def test_a_reordered_label_dictionary_is_one_error(sst2_checkpoint, glue_bin, tmp_path):
    data = tmp_path / "SST-2"
    shutil.copytree(glue_bin / "SST-2", data)
    lines = (data / "label" / "dict.txt").read_text().splitlines(keepends=True)
    (data / "label" / "dict.txt").write_text("".join([lines[1], lines[0], *lines[2:]]))
    proc = _predict(sst2_checkpoint, data, tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    labels = _labels_of(glue_bin / "SST-2")
    assert (
        f"the checkpoint's outputs are the labels {', '.join(labels)} in this order" in proc.stderr
    )
    assert "the same labels in another order" in proc.stderr and "Traceback" not in proc.stderr


def test_a_checkpoint_without_the_record_is_checked_for_what_can_be_seen(
    sst2_checkpoint, glue_bin, tmp_path
):
    state = torch.load(sst2_checkpoint, weights_only=False)
    del state["extra_state"]["truneg_records"]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    proc = _predict(old, glue_bin / "MNLI", tmp_path / "pred.txt")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "classification head has 2 outputs" in proc.stderr and "has 3 labels" in proc.stderr
    proc = _predict(old, glue_bin / "STS-B", tmp_path / "pred.txt")
    assert proc.returncode == 2 and "the checkpoint is a classifier" in proc.stderr
    proc = _predict(old, glue_bin / "SST-2", tmp_path / "pred.txt")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "records no label dictionary" in proc.stderr + proc.stdout
    assert "its labels cannot be checked" in proc.stderr + proc.stdout
