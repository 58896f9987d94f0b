"""evaluate_mlm.py with several checkpoints: one side-by-side table (printed, --table-md,
--table-json), every checkpoint on the same masks and one block size (the smallest max
positions among them, said in the output), progress lines in fairseq's format, and the config
dataclass of the library functions.

The checkpoints are real fairseq-train runs (64 and 32 positions) whose masked-LM head is made
to always predict one word, so two of them that predict the same word must get the same
accuracy when, and only when, they are scored on the same masks."""

import json
import re

import pytest
from command_runs import run_script
from corpus_fixtures import word_level_data
from fairseq_runs import TINY_ROBERTA, fairseq_train, force_prediction

SHORT = ["the big house is large .", "a small house .", "the large dog saw a big big cat ."]
LONG = " ".join(["the big house near the lake"] * 5) + " ."  # 31 words: 33 ids, over 32
VALID = SHORT * 6 + [LONG]
TRAIN = (SHORT + ["a little house near the lake .", "the cat saw the house ."]) * 12


def _arch(positions: int):
    args = list(TINY_ROBERTA)
    for flag in ("--max-positions", "--tokens-per-sample"):
        args[args.index(flag) + 1] = str(positions)
    return args


@pytest.fixture(scope="module")
def models(tmp_path_factory, wn):
    """A word-level data-bin and three checkpoints: 64 positions predicting "large" and
    "house", 32 positions predicting "house"."""
    work = tmp_path_factory.mktemp("eval_table")
    data = word_level_data(work, TRAIN, VALID, wn)
    out = {"data": data, "table": data / "synonyms.npz", "valid": work / "valid.txt"}
    for positions in (64, 32):
        fairseq_train(
            data,
            work / f"run{positions}",
            [
                "--criterion",
                "masked_lm",
                *_arch(positions),
                "--sample-break-mode",
                "eos",
                "--max-update",
                "1",
                "--disable-validation",
            ],
        )
    last = "checkpoint_last.pt"
    out["large64"] = force_prediction(work / "run64" / last, data, "large", work / "large64.pt")
    out["house64"] = force_prediction(work / "run64" / last, data, "house", work / "house64.pt")
    out["house32"] = force_prediction(work / "run32" / last, data, "house", work / "house32.pt")
    return out


def _run(argv):
    proc = run_script("evaluate_mlm.py", [str(a) for a in argv])
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return proc.stdout


def test_one_table_same_masks_and_the_smallest_block_size(models, tmp_path):
    cks = [models["large64"], models["house64"], models["house32"]]
    md, js = tmp_path / "out" / "table.md", tmp_path / "out" / "table.json"
    out = _run(
        [
            "--data",
            models["data"],
            "--synonym-table",
            models["table"],
            "--batch-size",
            "4",
            "--progress-seconds",
            "0",
            "--table-md",
            md,
            "--table-json",
            js,
            *cks,
        ]
    )
    said = f"blocks of at most 32 tokens (the smallest max positions: {models['house32']})"
    assert said in out
    # one table: a header, a rule, one row per checkpoint in the order given
    lines = out.splitlines()
    head = [i for i, line in enumerate(lines) if line.startswith("checkpoint ")]
    assert len(head) == 1 and set(lines[head[0] + 1]) <= {"-", " "}
    rows = lines[head[0] + 2 : head[0] + 5]
    assert [r.split()[0] for r in rows] == [str(c) for c in cks]
    # the 33-id line is longer than 32: left out once, for every checkpoint alike
    assert f"left out 1 of {len(VALID)} blocks longer than 32 tokens" in out
    table = json.loads(js.read_text())
    assert table["block_size"] == 32 and table["block_from"] == str(models["house32"])
    got = {r["checkpoint"]: r for r in table["rows"]}
    assert [r["checkpoint"] for r in table["rows"]] == [str(c) for c in cks]
    assert len({(r["masked"], r["sequences"]) for r in table["rows"]}) == 1
    assert got[str(cks[0])]["sequences"] == len(VALID) - 1
    # the same word predicted on the same masks: the same accuracy to the last digit
    h64, h32, l64 = got[str(cks[1])], got[str(cks[2])], got[str(cks[0])]
    assert h64["mlm_acc"] == h32["mlm_acc"] and h64["counts"]["correct"] > 0
    assert l64["pred_corr_ratio"] > 0 and h64["pred_corr_ratio"] == 0
    # Markdown: the same line, then the table
    text = md.read_text().splitlines()
    assert said in text[0] and text[1] == "" and len(text) == 7
    assert text[2].startswith("| checkpoint | loss (bits) |")
    assert text[6].startswith(f"| {cks[2]} | ")
    # progress lines in fairseq's format, one per batch with --progress-seconds 0
    progress = re.findall(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| INFO \| truneg_fairseq\.pipelines\.scorer \| "
        r"scoring (\S+): batch (\d+) of (\d+), \d+ sequences, \d+ masked words, \d+s$",
        out,
        re.M,
    )
    assert {p[0] for p in progress} == {str(c) for c in cks}
    batches = (len(VALID) - 1 + 3) // 4
    assert [int(p[1]) for p in progress if p[0] == str(cks[0])] == list(range(1, batches + 1))
    assert all(int(p[2]) == batches for p in progress)


def test_first_row_is_that_checkpoint_alone_at_the_common_block_size(models):
    """The masks are those the first checkpoint's task draws: its row equals its own scoring at
    that block size, through the library's config dataclass."""
    from truneg_fairseq.pipelines.evaluate_mlm import EvalConfig, compare, evaluate_mlm

    cfg = EvalConfig(synonym_table=str(models["table"]), batch_size=4, progress_seconds=60)
    both = compare([str(models["house64"]), str(models["house32"])], str(models["data"]), None, cfg)
    alone = evaluate_mlm(str(models["house64"]), str(models["data"]), config=cfg, block_size=32)
    assert both.block_size == 32
    assert both.scored[0].counts.as_dict() == alone.counts.as_dict()
    assert both.scored[1].counts.masked == alone.counts.masked
    # one checkpoint alone keeps its own block size: the 33-id line is scored
    own = evaluate_mlm(str(models["house64"]), str(models["data"]), config=cfg)
    assert own.counts.sequences == len(VALID)


def test_text_mode_cuts_every_line_to_the_smallest_positions(models, tmp_path):
    js = tmp_path / "t.json"
    out = _run(
        [
            "--text",
            models["valid"],
            "--tokenizer",
            "whitespace",
            "--mask-prob",
            "1",
            "--table-json",
            js,
            models["house64"],
            models["house32"],
        ]
    )
    assert "blocks of at most 32 tokens" in out
    rows = json.loads(js.read_text())["rows"]
    n_words = sum(min(len(line.split()), 30) for line in VALID)
    assert rows[0]["masked"] == rows[1]["masked"] == n_words
    assert rows[0]["mlm_acc"] == rows[1]["mlm_acc"]


def test_json_lines_stay_one_object_per_checkpoint(models):
    out = _run(["--data", models["data"], "--json", models["house64"], models["house32"]])
    objs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [o["checkpoint"] for o in objs] == [str(models["house64"]), str(models["house32"])]
    assert "checkpoint " not in out.split("{", 1)[0].splitlines()[-1:]


def test_table_path_that_is_a_directory_is_one_line(models, tmp_path):
    proc = run_script(
        "evaluate_mlm.py",
        ["--data", str(models["data"]), "--table-md", str(tmp_path), str(models["house64"])],
    )
    assert proc.returncode == 2
    assert proc.stderr == f"error: --table-md {tmp_path} is a directory: give a file name\n"
