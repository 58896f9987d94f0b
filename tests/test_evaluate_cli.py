"""scripts/evaluate_mlm.py and scripts/build_synonym_table.py on real tiny checkpoints and data:
Figure-3 cases (or the line saying there is none) in both modes, the MLM loss of --text,
--long-lines skip/break on a split with lines longer than the model's positions, import and
HuggingFace directories in the checkpoint and --data places, the coverage line's rules, and no
hydra deprecation notices on stderr.

The word-level checkpoints are real fairseq-train runs whose masked-LM head is then made to
always predict one word (a bias of 1000 on it), so their predictions, cases and losses are
known in advance."""

import json
import math
import re
import shutil

import pytest
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines, word_level_data
from fairseq_runs import TINY_ROBERTA, fairseq_train, force_prediction
from hf_fixtures import save_bert, wordpiece_vocab

SHORT = ["the big house is large .", "a small house .", "the large dog saw a big big cat ."]
LONG = " ".join(["the big house near the lake"] * 12) + " ."  # 73 words: 75 ids with <s> and </s>
VALID = SHORT * 8 + [LONG, LONG]
TRAIN = (
    SHORT
    + ["a little house near the lake .", "the small dog is little .", "the cat saw the house ."]
) * 20
POSITIONS = 64  # TINY_ROBERTA's --max-positions and --tokens-per-sample


@pytest.fixture()
def run_main():
    """Run a script's main() in this process (tests/command_runs.py's run_script): (exit code, stdout,
    stderr)."""

    def run(name, argv):
        proc = run_script(f"{name}.py", [str(a) for a in argv])
        return proc.returncode, proc.stdout, proc.stderr

    return run


@pytest.fixture(scope="module")
def words(tmp_path_factory, wn):
    """A whitespace-word data-bin (one block per line: --sample-break-mode eos), its WordNet
    table, and two checkpoints of one real training run: one always predicts "large" (a WordNet
    synonym of "big"), the other "house" (no synonym of any word here)."""
    work = tmp_path_factory.mktemp("eval_words")
    data = word_level_data(work, TRAIN, VALID, wn)
    fairseq_train(
        data,
        work / "run",
        [
            "--criterion",
            "masked_lm",
            *TINY_ROBERTA,
            "--sample-break-mode",
            "eos",
            "--max-update",
            "1",
            "--disable-validation",
        ],
    )
    out = {"data": data, "table": data / "synonyms.npz", "valid": work / "valid.txt"}
    for word in ("large", "house"):
        out[word] = force_prediction(
            work / "run" / "checkpoint_last.pt", data, word, work / f"{word}.pt"
        )
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """A tiny random BERT saved by transformers and imported by the real convert_hf.py in a
    subprocess (its stderr kept), and a data-bin binarized with the import's dict.txt."""
    from truneg_fairseq.data import corpus_steps

    root = tmp_path_factory.mktemp("eval_import")
    save_bert(root / "hf", vocab=wordpiece_vocab())
    proc = run_script("convert_hf.py", ["import", str(root / "hf"), str(root / "imp")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = tiny_corpus_lines(120, seed=4)
    corpus_steps.atomic_write_lines(root / "train.txt", lines[:100])
    corpus_steps.atomic_write_lines(root / "valid.txt", lines[100:])
    data = corpus_steps.binarize(
        root / "train.txt", root / "valid.txt", root / "data-bin", srcdict=root / "imp" / "dict.txt"
    )
    return {
        "root": root,
        "hf": root / "hf",
        "imp": root / "imp",
        "data": data,
        "import_stderr": proc.stderr,
        "valid": root / "valid.txt",
    }


def _result(out: str, ck) -> dict:
    """The values of ``ck`` in its summary line (logged in fairseq's format)."""
    line = next(
        ln for ln in out.splitlines() if f"| INFO | truneg_fairseq.evaluate_mlm | {ck}: " in ln
    )
    rest = line.split(f"| {ck}: ", 1)[1]
    return {k: float(v) for k, v in re.findall(r"(\w+) ([-\d.e+]+)", rest)}


# ---- --data: cases, the line when there is none, long lines ---------------------------------------
def test_data_mode_cases_and_long_lines_left_out(words):
    """The real CLI in a subprocess: no traceback for lines longer than the model's positions,
    which are left out with a count; cases of the "large" model; one line for the "house" one."""
    proc = run_script(
        "evaluate_mlm.py",
        [
            "--data",
            str(words["data"]),
            "--synonym-table",
            str(words["table"]),
            "--show",
            "3",
            str(words["large"]),
            str(words["house"]),
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert f"left out 2 of {len(VALID)} blocks longer than {POSITIONS} tokens" in proc.stdout
    large, house = _result(proc.stdout, words["large"]), _result(proc.stdout, words["house"])
    assert large["sequences"] == house["sequences"] == len(VALID) - 2
    cases = re.findall(
        r"case (\d+): (.*)\n  gold: (\w+) \| prediction: (\w+) \| WordNet synonyms of '(\w+)' in the "
        r"vocabulary: (.*)",
        proc.stdout,
    )
    assert [c[0] for c in cases] == ["1"]  # one distinct (gold, prediction) pair: big -> large
    _, sentence, gold, pred, of, synonyms = cases[0]
    assert (gold, pred, of) == ("big", "large", "big") and "large" in synonyms.split(", ")
    assert "[MASK]" in sentence and sentence.replace("[MASK]", "big") in SHORT
    n = int(house["masked"])
    assert (
        n > 0
        and f"no synonym prediction among the {n} masked word positions: nothing to show"
        in proc.stdout
    )
    assert proc.stdout.count("nothing to show") == 1


def test_data_mode_long_lines_break_keeps_every_token(words, run_main):
    code, out, err = run_main(
        "evaluate_mlm", ["--data", words["data"], "--long-lines", "break", words["house"]]
    )
    assert code == 0, err
    total = sum(
        len(ln.split()) + 1 for ln in VALID
    )  # words and </s>, in blocks of POSITIONS - 1 plus <s>
    assert _result(out, words["house"])["sequences"] == math.ceil(total / (POSITIONS - 1))
    assert "left out" not in out and f"cut into blocks of at most {POSITIONS} tokens" in out


# ---- --text: the MLM loss and the cases -----------------------------------------------------------
def test_text_mode_reports_the_loss_and_shows_cases(words, run_main):
    """Every word masked (--mask-prob 1), lines cut to the model's positions: the "large" model
    is wrong on every word but "large", by a logit gap of about 1000 nats, so its loss is about
    1000 / ln 2 bits per wrong word."""
    code, out, err = run_main(
        "evaluate_mlm",
        [
            "--text",
            words["valid"],
            "--tokenizer",
            "whitespace",
            "--synonym-table",
            words["table"],
            "--device",
            "cpu",
            "--mask-prob",
            "1",
            "--show",
            "2",
            words["large"],
            words["house"],
        ],
    )
    assert code == 0, err
    # the long lines are cut to the model's positions (not to --max-len's default 128)
    n_words = sum(min(len(ln.split()), POSITIONS - 2) for ln in VALID)
    assert f"cut 2 of {len(VALID)} lines of {words['valid']} to {POSITIONS} ids" in out
    large, house = _result(out, words["large"]), _result(out, words["house"])
    assert large["masked"] == house["masked"] == n_words
    n_right = sum(ln.split()[: POSITIONS - 2].count("large") for ln in VALID)
    assert large["mlm_acc"] == pytest.approx(100 * n_right / n_words, abs=1e-3)
    per_wrong_nats = large["mlm_loss"] * math.log(2) * n_words / (n_words - n_right)
    assert abs(per_wrong_nats - 1000) < 15, large
    assert house["mlm_loss"] < large["mlm_loss"]  # right on every "house"
    # the first line's "big" is the first synonym prediction; the other masked words stay as they were
    assert (
        "case 1: the [MASK] house is large .\n  gold: big | prediction: large | "
        "WordNet synonyms of 'big' in the vocabulary: "
    ) in out
    assert "case 2:" not in out  # one distinct pair
    assert (
        f"no synonym prediction among the {n_words} masked word positions: nothing to show" in out
    )


# ---- directories ------------------------------------------------------------------------------
def test_an_import_directory_stands_for_its_model_in_both_modes(imported, run_main):
    imp = imported["imp"]
    code, out, err = run_main("evaluate_mlm", ["--data", imported["data"], imp])
    assert code == 0, err
    data = _result(out, imp)
    assert data["masked"] > 0 and data["mlm_loss"] > 0
    code, out, err = run_main("evaluate_mlm", ["--text", imported["valid"], "--device", "cpu", imp])
    assert code == 0, err
    text = _result(out, imp)
    assert text["masked"] > 0 and text["mlm_loss"] > 0


@pytest.mark.parametrize(
    "case", ["hf_checkpoint", "plain_directory", "import_as_data", "no_dict", "no_split"]
)
def test_directories_in_the_wrong_place_are_one_line(imported, words, tmp_path, run_main, case):
    imp, hf = imported["imp"], imported["hf"]
    if case == "hf_checkpoint":
        argv, want = (
            ["--data", imported["data"], hf],
            (
                f"{hf} is a HuggingFace model directory: import it first with python scripts/convert_hf.py import {hf} "
                "OUT_DIR, then evaluate OUT_DIR"
            ),
        )
    elif case == "plain_directory":
        argv, want = (
            ["--data", imported["data"], tmp_path],
            f"checkpoint {tmp_path} is a directory without model.pt",
        )
    elif case == "import_as_data":
        argv, want = (
            ["--data", imp, imp],
            f"--data {imp} is a model directory written by convert_hf.py import",
        )
    elif case == "no_dict":
        argv, want = ["--data", tmp_path, imp], f"--data {tmp_path} has no dict.txt"
    else:  # dict.txt and train, no valid split
        data = tmp_path / "data-bin"
        shutil.copytree(words["data"], data)
        for ext in ("bin", "idx"):
            (data / f"valid.{ext}").unlink()
        argv, want = (
            ["--data", data, words["house"]],
            f"--data {data} has no binarized split 'valid'",
        )
    code, out, err = run_main("evaluate_mlm", argv)
    assert code == 2, err + out[-2000:]
    assert err.startswith("error: ") and err.count("\n") == 1 and want in err, err
    if case == "no_split":
        assert "found: train" in err


# ---- build_synonym_table.py: what the coverage counts -----------------------------------------------
def test_coverage_line_names_what_it_counts(imported, tmp_path, run_main):
    import numpy as np

    imp = imported["imp"]
    code, out, err = run_main(
        "build_synonym_table",
        [
            "--dict",
            imp / "dict.txt",
            "--tokenizer",
            "wordpiece",
            "--vocab",
            imp / "vocab.txt",
            "--output",
            tmp_path / "t.npz",
        ],
    )
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "| coverage " in ln)
    m = re.search(
        r"coverage ([\d.]+)%: (\d+) of (\d+) candidate entries have at least one WordNet synonym that is "
        r"itself a candidate entry",
        line,
    )
    assert m, line
    with np.load(tmp_path / "t.npz") as z:
        meta = json.loads(str(z["meta"]))
    assert int(m.group(3)) == meta["num_candidates"]
    assert float(m.group(1)) == pytest.approx(100 * meta["coverage"], abs=0.01)
    for rule in (
        "word-start entries",
        "not continuation pieces",
        "ASCII letters only",
        "not an English stopword",
        "not mixed-case",
        f"{len((imp / 'dict.txt').read_text().splitlines()) + 4} entries in all",
    ):
        assert rule in line, rule
    assert "62.51%" in line and "not comparable" in line
    assert "the paper reports" not in line


# ---- no hydra deprecation notices ---------------------------------------------------------------
def test_conversion_prints_no_hydra_deprecation_notices(imported):
    """convert_hf.py import composes a fairseq config (fairseq's hydra compose path)."""
    stderr = imported["import_stderr"]
    assert not [ln for ln in stderr.splitlines() if "deprecat" in ln.lower()], stderr
    assert "hydra" not in stderr.lower(), stderr
