"""The demo's and the study's table builders: correction ratios, synonym-aware accuracy and
Figure-3 cases, by hand on fixed tensors and on a real checkpoint whose predictions are known;
the study end to end at a tiny size."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from corpus_fixtures import word_level_data
from fairseq_runs import TINY_ROBERTA, fairseq_train, force_prediction
from repo_paths import REPO

from truneg_fairseq.core.selection import MaskSelection
from truneg_fairseq.evaluation.false_negatives import (
    Counts,
    Report,
    derive,
    ordinary_positions,
    pack_units,
    pick_cases,
    sentence_around,
    step_counts,
    synonym_predictions,
)
from truneg_fairseq.pipelines import study
from truneg_fairseq.pipelines.scorer import FixedMaskScorer


# ---- pure functions on a fixed batch ------------------------------------------------------------
def _counts(tokens, masked, pred, is_pair, ends_word, content_ids=(), nspecial=4, mask_idx=99):
    """The criterion's counting on a B x T batch (``masked`` B x T bool, ``pred`` the M
    predictions in the order of tokens[masked])."""
    sel = MaskSelection(masked)
    gold = sel.take(tokens)
    syn = synonym_predictions(gold, pred, is_pair, ends_word)
    word = ordinary_positions(gold, nspecial, mask_idx)
    content = torch.zeros(100, dtype=torch.bool)
    content[list(content_ids)] = True
    log = step_counts(sel.rows_any, word, pred.eq(gold), ~word, tokens.size(0), syn, content[pred])
    return Counts.from_logs([log])


def test_counts_by_hand():
    # 3 sequences: <s> = 0, </s> = 2; row 0 masks its <s> too (fairseq's masked_lm can)
    tokens = torch.tensor([[0, 5, 6, 2], [0, 7, 8, 2], [0, 9, 5, 2]])
    masked = torch.tensor(
        [[True, True, True, False], [False, True, True, False], [False, True, True, False]]
    )
    pred = torch.tensor([0, 5, 10, 11, 8, 12, 13])  # gold: 0 5 6 | 7 8 | 9 5
    is_pair = torch.tensor([False, True, True, True, False, False, True])
    ends_word = torch.tensor(
        [True, True, True, False, True, True, True]
    )  # gold 7 is a subword piece
    c = _counts(tokens, masked, pred, is_pair, ends_word, content_ids=(10, 12, 5))
    assert (c.sequences, c.masked_sequences, c.synonym_sequences) == (3, 3, 2)
    assert (c.masked, c.correct, c.synonym, c.content, c.special_masked) == (6, 2, 2, 3, 1)
    r = derive(c)
    assert r.mlm_acc == pytest.approx(100 * 2 / 6)  # the masked <s> is not a word
    assert r.syn_acc == pytest.approx(100 * 4 / 6)  # 2 right + 2 synonym predictions
    assert r.pred_corr_ratio == pytest.approx(100 * 2 / 4)  # of the 4 mispredicted words
    assert r.iter_corr_ratio == pytest.approx(100 * 2 / 3)  # rows 0 and 2
    assert r.content_pred == pytest.approx(100 * 3 / 6)  # predictions 5, 10, 12
    assert r.iter_corr_ratio_512 is None  # no units packed (a fairseq log has none)
    assert (c + c).masked == 12 and (c + c).with_synonyms


def test_iteration_level_counts_sequences_that_hold_a_masked_word():
    """12 sequences, 5 of them with nothing masked, every masked word predicted as a synonym:
    the iteration level is 100% (7 of the 7 sequences with a masked word), not 7 of 12."""
    tokens = torch.arange(4, 4 + 12 * 3).view(12, 3)
    masked = torch.zeros(12, 3, dtype=torch.bool)
    masked[:7, 1] = True
    gold = tokens[masked]
    c = _counts(
        tokens, masked, gold + 50, torch.ones(7, dtype=torch.bool), torch.ones(7, dtype=torch.bool)
    )
    r = derive(c)
    assert (c.sequences, c.masked_sequences, c.synonym_sequences) == (12, 7, 7)
    assert r.iter_corr_ratio == 100.0 and r.pred_corr_ratio == 100.0 and r.syn_acc == 100.0


def test_units_of_512_tokens_pack_sequences_in_order():
    # 300 + 200 tokens fit one unit; the next 100 starts the second; 600 is a unit of its own
    assert pack_units(
        [300, 200, 100, 600], [True, False, False, True], [False, False, False, True]
    ) == (2, 1)
    assert pack_units([300, 200, 100], [False, False, True], [False, False, True], unit=512) == (
        1,
        1,
    )
    assert pack_units([], [], []) == (0, 0)


def test_false_negative_ratios_are_computed_in_one_module():
    """The formulas of the ratios live in core/statistics.py alone."""
    import re

    root = REPO / "truneg_fairseq"
    found = []
    for path in list(root.rglob("*.py")) + list((REPO / "scripts").glob("*.py")):
        text = path.read_text()
        code = "\n".join(line.split("#")[0] for line in text.splitlines())
        # a division by a count of masked positions or sequences, in a file that names a ratio
        if re.search(
            r"(?<!/)/\s*(max\()?[\w.\[\]\"'(]*(masked|wrong|sequences|blocks|units|nsent)|_pct\(",
            code,
        ) and re.search(r"corr_ratio|syn_acc", text):
            found.append(path.relative_to(REPO).as_posix())
    assert found == ["truneg_fairseq/core/statistics.py"], found


def test_cases_and_sentences():
    gold = torch.tensor([1, 2, 1, 3])
    pred = torch.tensor([4, 5, 4, 6])
    syn = torch.tensor([True, False, True, True])
    seen = set()
    assert pick_cases(gold, pred, syn, 5, seen) == [0, 3]  # (1, 4) once
    assert pick_cases(gold, pred, syn, 5, seen) == []  # pairs already shown
    # <s> a b </s> c d e </s> <pad>: the sentence of position 5 is c d e
    block = [0, 10, 11, 2, 12, 13, 14, 2, 1]
    assert sentence_around(block, 5, eos=2, skip=(0, 1)) == [4, 5, 6]
    assert sentence_around(block, 1, eos=2, skip=(0, 1)) == [1, 2]
    assert sentence_around([0, 10, 11], 2, eos=2, skip=(0, 1)) == [
        1,
        2,
    ]  # block cut before its </s>


def test_table_layouts():
    import dataclasses

    r = {"a": {0: Report(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None, 0, 0, 0, 0)}}
    for u, v in ((10, 0.5), (20, 1.0), (30, 1.5), (40, 2.0), (50, 2.5)):
        r["a"][u] = dataclasses.replace(r["a"][0], pred_corr_ratio=v)
    rows = study.table2(r, "pred_corr_ratio")
    assert rows[0] == ["run", "20%", "40%", "60%", "80%", "100%"]
    assert rows[1] == ["a", "0.500", "1.000", "1.500", "2.000", "2.500"]
    prog = study.progress_table(r)
    assert [p[1] for p in prog[1:]] == ["0", "10", "20", "30", "40", "50"]
    assert prog[1][-1] == "-"  # no content-word list: shown as missing, not as 0
    assert study.word_tokenize("Main, primary (chief).") == "main , primary ( chief ) ."


def test_corpus_lines_leave_out_long_lines_and_unknown_words_with_counts(caplog):
    import logging

    raw = [
        "The big house.",
        "A big dog!",
        "the house",
        "big big big big big big big",
        "",
        "a zebra house",
    ]
    setting = study.Setting(vocab_size=5, tokens_per_sample=8, families=[])
    log = logging.getLogger("t")
    with caplog.at_level(logging.INFO, logger="t"):
        lines = study.corpus_lines(raw, setting, log)
    # 7 words + <s> + </s> > 8 positions: left out; the 5 most frequent words of the rest: house (3),
    # the, big, a (2 each) and "." (the first of the words seen once)
    assert lines == ["the big house .", "the house"]
    assert "left out 1 lines longer than 6 words" in caplog.text
    assert "kept 2 of 4 lines: 2 hold a word outside the 5 most frequent" in caplog.text
    setting.in_vocab_only = False
    assert len(study.corpus_lines(raw, setting, log)) == 4


def test_dictionary_entries_start_with_their_synset_words():
    from truneg_fairseq.data.corpus_steps import wordnet_gloss_lines

    entries = [
        line
        for line in wordnet_gloss_lines(headwords=True)
        if line.startswith("chief, main, primary")
    ]
    assert entries == ["chief, main, primary, principal, master: most important element"]
    plain = next(iter(wordnet_gloss_lines()))
    assert plain.startswith("that which is perceived")  # without headwords: the definition alone


# ---- a real checkpoint with known predictions ----------------------------------------------------
VALID = ["the big house is large .", "a small house .", "the large dog saw a big big cat ."]
TRAIN = (
    VALID
    + ["a little house near the lake .", "the small dog is little .", "the cat saw the house ."]
) * 20


@pytest.fixture(scope="module")
def word_data(tmp_path_factory, wn):
    return word_level_data(tmp_path_factory.mktemp("words"), TRAIN, VALID, wn)


def _always_predicts(data_bin: Path, save: Path, word: str) -> Path:
    """A real fairseq-train checkpoint (1 update) whose masked-LM head always predicts ``word``."""
    fairseq_train(
        data_bin,
        save,
        ["--criterion", "masked_lm", *TINY_ROBERTA, "--max-update", "1", "--disable-validation"],
    )
    ck = save / "checkpoint_last.pt"
    return force_prediction(ck, data_bin, word, ck)


def test_scorer_on_a_checkpoint_by_hand(word_data, tmp_path):
    ck = _always_predicts(word_data, tmp_path / "ck", "large")
    # every word masked (mask_prob 1); blocks of <= 11 ids hold one line each (7, 5 and 10 ids
    # with </s>): 19 masked words; "large" twice (right), "big" three times (a WordNet synonym
    # of "large") in lines 1 and 3
    scorer = FixedMaskScorer(
        str(word_data),
        str(word_data / "synonyms.npz"),
        tokens_per_sample=12,
        break_mode="complete",
        mask_prob=1.0,
    )
    scored = scorer.score_checkpoint(str(ck), num_cases=5)
    c, cases = scored.counts, scored.cases
    assert (
        c.masked,
        c.correct,
        c.synonym,
        c.sequences,
        c.masked_sequences,
        c.synonym_sequences,
        c.content,
    ) == (19, 2, 3, 3, 3, 2, 19)
    r = scored.report
    assert r.pred_corr_ratio == pytest.approx(100 * 3 / 17)
    assert r.iter_corr_ratio == pytest.approx(100 * 2 / 3)
    assert r.iter_corr_ratio_512 == 100.0  # the three lines (25 tokens) are one 512-token unit
    assert r.syn_acc == pytest.approx(100 * 5 / 19)
    assert r.mlm_acc == pytest.approx(100 * 2 / 19)
    assert len(cases) == 1  # one distinct (gold, prediction) pair
    case = cases[0]
    assert (case.sentence, case.gold, case.prediction) == (
        "the [MASK] house is large .",
        "big",
        "large",
    )
    assert "large" in case.synonyms and case.checkpoint == str(ck)
    # two mask draws over the same blocks: every count doubles (mask_prob 1 draws the same masks)
    twice = FixedMaskScorer(
        str(word_data),
        str(word_data / "synonyms.npz"),
        tokens_per_sample=12,
        break_mode="complete",
        mask_prob=1.0,
        passes=2,
    )
    c2x = twice.score_checkpoint(str(ck)).counts
    assert (c2x.masked, c2x.synonym, c2x.masked_sequences) == (38, 6, 6)
    # the same masks for a second checkpoint: a model that predicts the gold's synonym less often
    ck2 = _always_predicts(word_data, tmp_path / "ck2", "house")
    c2 = scorer.score_checkpoint(str(ck2)).counts
    assert (c2.masked, c2.correct, c2.synonym) == (19, 2, 0)


# ---- the study end to end ---------------------------------------------------------------------------
STUDY_FILES = (
    "table2_pred_level.tsv",
    "table2_iter_level.tsv",
    "progress.tsv",
    "results.json",
    "cases.txt",
    "commands.sh",
    "summary.md",
    "ratios.png",
    "losses.png",
)
ROBERTA_RUNS = [
    "roberta_mlm_plain",
    "roberta_mlm_hard_correction",
    "roberta_mlm_soft_reg",
    "roberta_mlm_sent_kl",
]
ELECTRA_RUNS = ["electra_electra", "electra_mlm_hard_correction"]


def run_study(work: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        str(REPO / "examples" / "study" / "run_study.py"),
        "--scale",
        "tiny",
        "--workdir",
        str(work),
        "--out",
        str(out),
        "--points",
        "2",
        "--jobs",
        "2",
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1")
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def assert_study_outputs(out: Path, runs):
    for name in STUDY_FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    rows = [line.split("\t") for line in (out / "table2_pred_level.tsv").read_text().splitlines()]
    assert rows[0] == ["run", "50%", "100%"]
    assert [r[0] for r in rows[1:]] == runs
    assert (out / "ratios.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture(scope="module")
def roberta_study(tmp_path_factory):
    """examples/study/run_study.py --scale tiny for RoBERTa and its baseline alone (corpus,
    table, word vectors, stage 1, the continuation, scores, tables, plots): what a user who
    starts small has in the work directory."""
    root = tmp_path_factory.mktemp("study")
    proc = run_study(
        root / "work", root / "results", "--families", "roberta", "--roberta-criteria", "mlm_plain"
    )
    return {"work": root / "work", "out": root / "results", "log": proc.stdout}


@pytest.mark.slow
def test_study_tiny_one_family(roberta_study):
    out, log = roberta_study["out"], roberta_study["log"]
    assert_study_outputs(out, ROBERTA_RUNS[:1])
    commands = (out / "commands.sh").read_text()
    for script, command in (
        ("prepare_corpus.py", "truneg-prepare-corpus"),
        ("build_synonym_table.py", "truneg-build-synonyms"),
        ("word_vectors.py", "truneg-word-vectors"),
    ):  # each step as the command that makes the same file
        assert f"scripts/{script} " in commands or f"{command} " in commands, command
    assert commands.count("fairseq_cli.train") == 2 and commands.count("--restore-file") == 1
    assert "scoring 3 checkpoints, 2 at a time" in log
    # the baseline's training logs hold the ratios, as the other criterions' do
    for run in ("train_roberta_stage1", "train_roberta_mlm_plain"):
        train_log = (roberta_study["work"] / "logs" / f"{run}.log").read_text()
        assert re.search(r"\| train \| .*pred_corr_ratio [\d.]+ \| iter_corr_ratio", train_log), run


@pytest.mark.slow
def test_a_step_made_with_other_flags_is_made_again_not_reused(roberta_study, tmp_path):
    """The work directory of the one-family run asked for another learning rate: the corpus,
    data-bin, table and word vectors are reused (their commands and inputs are the same); both
    trainings are made again, the log saying what differs, and the new checkpoints hold the new
    learning rate (a step is never taken for another by its folder's name)."""
    work = tmp_path / "work"
    shutil.copytree(roberta_study["work"], work)
    proc = run_study(
        work, tmp_path / "results", "--families", "roberta", "--roberta-criteria", "mlm_plain",
        "--lr", "1e-3",
    )  # fmt: skip
    commands = (tmp_path / "results" / "commands.sh").read_text()
    assert commands.count("# reused") == 4 and commands.count("fairseq_cli.train") == 2, commands
    said = re.findall(
        r"(\S+): not reused, made from other inputs or flags \((.*)\); made", proc.stdout
    )
    assert {Path(p).name for p, _ in said} == {"roberta_stage1", "roberta_mlm_plain"}, proc.stdout
    why = {Path(p).name: why for p, why in said}
    assert "0.002 -> 0.001" in why["roberta_stage1"], why  # the continuation: half of it, and
    assert "0.001 -> 0.0005" in why["roberta_mlm_plain"], why  # the new stage 1 it starts from
    assert re.search(r"\d+:[0-9a-f]{32} -> \d+:[0-9a-f]{32}", why["roberta_mlm_plain"]), why
    ckpt = work / "checkpoints" / "roberta_mlm_plain" / "checkpoint_last.pt"
    cfg = torch.load(ckpt, map_location="cpu", weights_only=False)["cfg"]
    assert list(cfg["optimization"]["lr"]) == [0.0005]


@pytest.fixture(scope="module")
def roberta_study_all(roberta_study, tmp_path_factory):
    """The RoBERTa study completed with its three other criteria, in a copy of the smaller run's
    work directory."""
    root = tmp_path_factory.mktemp("study_all")
    shutil.copytree(roberta_study["work"], root / "work")
    proc = run_study(root / "work", root / "results", "--families", "roberta")
    return {"work": root / "work", "out": root / "results", "log": proc.stdout}


@pytest.mark.slow
def test_study_tiny_goes_on_from_an_earlier_run(roberta_study_all):
    """Every step the earlier run did is reused; the three other continuations are trained side
    by side."""
    out, log = roberta_study_all["out"], roberta_study_all["log"]
    assert_study_outputs(out, ROBERTA_RUNS)
    commands = (out / "commands.sh").read_text()
    assert commands.count("fairseq_cli.train") == 3 and commands.count("--restore-file") == 3
    # the corpus, data-bin, table, word vectors; stage 1, the baseline
    assert commands.count("# reused") == 4 + 2, commands
    assert (
        "running 3 commands, 2 at a time, " in log and "scoring 9 checkpoints, 2 at a time" in log
    )


@pytest.mark.slow
def test_study_tiny_end_to_end(roberta_study_all, tmp_path):
    """The whole tiny study (RoBERTa's four criteria, ELECTRA's two) in the work directory of
    the RoBERTa runs: ELECTRA's stage 1 and continuations are trained, all 14 checkpoints
    scored; the checkpoints scored two at a time in worker processes give exactly what one
    process gives."""
    work, out = tmp_path / "work", tmp_path / "results"
    shutil.copytree(roberta_study_all["work"], work)
    log = run_study(work, out, "--electra-criteria", "electra", "mlm_hard_correction").stdout
    assert_study_outputs(out, [*ROBERTA_RUNS, *ELECTRA_RUNS])
    commands = (out / "commands.sh").read_text()
    # with the earlier runs' 2 + 3: 8 training commands, 6 of them continuations
    assert commands.count("fairseq_cli.train") == 3 and commands.count("--restore-file") == 2
    # the corpus, data-bin, table, word vectors; RoBERTa's 5 runs
    assert commands.count("# reused") == 4 + 5, commands
    assert (
        "running 2 commands, 2 at a time, " in log and "scoring 14 checkpoints, 2 at a time" in log
    )
    saved = json.loads((out / "results.json").read_text())
    fields = saved["meta"]["setting"]
    families = [study.Family(**f) for f in fields.pop("families")]
    setting = study.Setting(**{**fields, "families": families, "jobs": 1})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker runs
    try:
        scores = study.score_all(
            setting, str(work), str(work / "data-bin"), str(work / "data-bin" / "synonyms.npz"), 5
        )
    finally:
        torch.set_num_threads(threads)
    assert {
        rid: {str(u): v.as_dict() for u, v in r.items()} for rid, r in scores.reports.items()
    } == saved["results"]
    assert [study.asdict(c) for c in scores.cases] == saved["cases"]


def test_side_by_side_commands_stop_at_the_first_failure(tmp_path):
    """Runner.run_many: a failing command stops the one still running and names its log."""
    import logging
    import time

    run = study.Runner(str(tmp_path), logging.getLogger("test"))
    jobs = [
        ([sys.executable, "-c", "import time; time.sleep(60)"], "slow"),
        ([sys.executable, "-c", "import sys; print('broken'); sys.exit(3)"], "broken"),
    ]
    t0 = time.time()
    with pytest.raises(SystemExit, match=r"broken failed \(exit 3\).*logs/broken\.log"):
        run.run_many(jobs, parallel=2)
    assert time.time() - t0 < 30
    assert (tmp_path / "logs" / "broken.log").read_text() == "broken\n"
    assert len(run.commands) == 2 and study.thread_env(2)["OMP_NUM_THREADS"] == str(
        max(1, study.usable_cpus() // 2)
    )
