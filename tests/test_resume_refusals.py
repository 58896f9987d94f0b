"""Resuming fairseq-train from a truncated checkpoint, one of other sizes, on another dictionary,
with another criterion or another synonym table: one error each (or, for the table, refused
unless asked); every checkpoint records its table."""

import shutil

import pytest
import torch
from failures import one_fairseq_error
from fairseq_runs import TINY_ROBERTA, fairseq_train

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
    one_fairseq_error(proc, f"{last} is not a readable checkpoint: truncated", "--restore-file")


def test_resuming_with_other_sizes_is_one_error_naming_the_flag(hc_run, data_bin, tmp_path):
    run = _copy(hc_run, tmp_path)
    args = [*HC, "--max-update", "2"]
    for flags, said in (
        (["--encoder-layers", "3"], "--encoder-layers 2 there, 3 here"),
        (["--encoder-ffn-embed-dim", "48"], "--encoder-ffn-embed-dim 64 there, 48 here"),
    ):
        proc = fairseq_train(data_bin, run, [*args, *flags], check=False)
        one_fairseq_error(
            proc, f"{run / 'checkpoint_last.pt'} does not fit the model built here", said
        )


def test_resuming_on_data_of_another_dictionary_is_one_error(hc_run, tmp_path):
    from corpus_fixtures import make_corpus, tiny_corpus_lines

    run = _copy(hc_run, tmp_path)
    other = make_corpus(tmp_path / "other", tiny_corpus_lines(300, seed=5), vocab_size=120)
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    proc = fairseq_train(other, run, args, check=False)
    one_fairseq_error(
        proc,
        f"{run / 'checkpoint_last.pt'} was trained with another dictionary than {other}/dict.txt",
        "give the data directory it was trained on",
    )


def test_resuming_with_another_criterion_is_one_error(hc_run, data_bin, tmp_path):
    run = _copy(hc_run, tmp_path)
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "2"]
    proc = fairseq_train(data_bin, run, args, check=False)
    one_fairseq_error(
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
    one_fairseq_error(
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


def test_a_finished_run_started_again_trains_and_writes_nothing(hc_run, data_bin, tmp_path):
    """The same command again on a run that holds --max-update updates: it says the run is
    finished, exits 0 and leaves every checkpoint as it was; a larger --max-update goes on."""
    run = _copy(hc_run, tmp_path)
    before = {p.name: p.read_bytes() for p in run.glob("*.pt")}
    again = fairseq_train(data_bin, run, [*HC, "--max-update", "1"])
    log = again.stdout + again.stderr
    assert "the run is finished" in log and "checkpoint_last.pt holds 1 updates" in log, log[-2000:]
    assert "num_updates: 2" not in log and "| train |" not in log
    assert {p.name: p.read_bytes() for p in run.glob("*.pt")} == before
    more = fairseq_train(data_bin, run, [*HC, "--max-update", "2"])
    assert "the run is finished" not in more.stdout
    state = torch.load(run / "checkpoint_last.pt", weights_only=False)
    assert state["optimizer_history"][-1]["num_updates"] == 2
