"""GLUE preparation on fixture files in the official layouts, and fine-tuning on them."""

import json
import re
import shutil

import pytest
from command_runs import run_script
from glue_fixtures import write_glue
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import matthews_corrcoef

from truneg_fairseq.data.corpus_steps import CorpusError
from truneg_fairseq.data.glue_tasks import TASKS, read_split_counted


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return write_glue(tmp_path_factory.mktemp("glue"))


@pytest.mark.parametrize("name", list(TASKS))
def test_read_every_task_layout(glue_dir, name):
    task = TASKS[name]
    exs, skipped = read_split_counted(task, glue_dir / task.folder / task.splits[0][1])
    assert len(exs) == 24
    assert sum(skipped.values()) == (
        1 if name == "QQP" else 0
    )  # the malformed QQP row is counted, not kept
    assert exs[0].text1.startswith("the farmer")
    assert (exs[0].text2 is None) == (task.sentence2 is None)
    if name == "MNLI":
        assert exs[1].label == "neutral" and exs[0].text2.startswith(
            '"'
        )  # stray quote kept as text
    if name == "STS-B":
        assert float(exs[5].label) == 5.0
    if name == "CoLA":
        assert exs[1].label == "1"


def test_missing_split_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="RTE.*dev.tsv not found"):
        read_split_counted(TASKS["RTE"], tmp_path / "RTE" / "dev.tsv")


def test_prepare_all_tasks_cli(glue_dir, corpus_dir, data_bin, tmp_path):
    out = tmp_path / "glue-bin"
    proc = run_script(
        "prepare_glue.py",
        [
            "--glue-dir",
            str(glue_dir),
            "--output-dir",
            str(out),
            "--dict",
            str(data_bin / "dict.txt"),
            "--tokenizer",
            "sentencepiece",
            "--spm-model",
            str(corpus_dir / "spm.model"),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "QQP train.tsv: skipped 1 malformed rows" in proc.stdout
    for name, task in TASKS.items():
        base = out / name
        assert (base / "input0" / "train.bin").is_file()
        assert (base / "input1").is_dir() == (task.sentence2 is not None)
        assert (base / "input0" / "dict.txt").read_text() == (data_bin / "dict.txt").read_text()
        if name == "STS-B":
            assert (base / "label" / "valid.label").read_text().split()[5] == "5.000"
        else:
            assert (base / "label" / "dict.txt").is_file()
    assert (out / "MNLI" / "input0" / "valid1.bin").is_file()  # dev_mismatched
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_prepare_a_folder_with_some_tasks_cli(glue_dir, corpus_dir, data_bin, tmp_path):
    """A GLUE folder holding two tasks: both are prepared, the others logged as skipped; a task
    asked for with --tasks whose folder is missing stays one error naming its file."""
    some = tmp_path / "glue"
    for name in ("RTE", "SST-2"):
        shutil.copytree(glue_dir / TASKS[name].folder, some / TASKS[name].folder)
    out = tmp_path / "glue-bin"
    common = [
        "--glue-dir",
        str(some),
        "--output-dir",
        str(out),
        "--dict",
        str(data_bin / "dict.txt"),
        "--tokenizer",
        "sentencepiece",
        "--spm-model",
        str(corpus_dir / "spm.model"),
    ]
    proc = run_script("prepare_glue.py", common)
    assert proc.returncode == 0, proc.stderr
    skipped = [n for n in TASKS if n not in ("RTE", "SST-2")]
    assert f"preparing SST-2, RTE; skipped (no folder there): {', '.join(skipped)}" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["RTE", "SST-2"]
    for name in ("RTE", "SST-2"):
        assert (out / name / "input0" / "train.bin").is_file()
        assert (out / name / "label" / "dict.txt").is_file()
    # the log names the final folders, never the staging ones the tasks are built in
    assert f"{out / 'RTE' / 'input0' / 'train'}: " in proc.stdout
    assert ".RTE.new-" not in proc.stdout and ".new-" not in proc.stdout
    proc = run_script("prepare_glue.py", common + ["--tasks", "RTE", "CoLA"])
    assert proc.returncode != 0
    assert re.search(r"CoLA.*train\.tsv not found", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0


def test_prepare_glue_checks_every_task_before_writing_one(
    glue_dir, corpus_dir, data_bin, tmp_path
):
    """SST-2 is fine, RTE is not (its dev.tsv missing; then a directory of the
    user's where RTE would go): one error, and no SST-2 output written before it."""
    some = tmp_path / "glue"
    for name in ("RTE", "SST-2"):
        shutil.copytree(glue_dir / TASKS[name].folder, some / TASKS[name].folder)
    dev = some / TASKS["RTE"].folder / "dev.tsv"
    dev.unlink()
    out = tmp_path / "glue-bin"
    common = [
        "--glue-dir",
        str(some),
        "--output-dir",
        str(out),
        "--dict",
        str(data_bin / "dict.txt"),
    ]
    common += ["--tokenizer", "sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    proc = run_script("prepare_glue.py", common + ["--tasks", "SST-2", "RTE"])
    assert proc.returncode != 0 and re.search(r"RTE.*dev\.tsv not found", proc.stderr), proc.stderr
    assert not (out / "SST-2").exists()
    shutil.copy(glue_dir / TASKS["RTE"].folder / "dev.tsv", dev)  # RTE readable again
    (out / "RTE").mkdir(parents=True)
    (out / "RTE" / "notes.txt").write_text("mine")
    proc = run_script("prepare_glue.py", common + ["--tasks", "SST-2", "RTE"])
    assert proc.returncode != 0 and "did not write" in proc.stderr, proc.stderr
    assert not (out / "SST-2").exists() and (out / "RTE" / "notes.txt").read_text() == "mine"


def predict_valid(checkpoint, data):
    """Predictions and targets of a sentence_prediction checkpoint on its valid split."""
    import torch

    from truneg_fairseq.checkpoints import load_for_inference

    models, cfg, task = load_for_inference(str(checkpoint), str(data), needs="input0/dict.txt")
    model = models[0]
    task.load_dataset("valid")
    ds = task.dataset("valid")
    sample = ds.collater([ds[i] for i in range(len(ds))])
    with torch.no_grad():
        logits = model(
            **sample["net_input"],
            features_only=True,
            classification_head_name="sentence_classification_head",
        )[0]
    if task.cfg.regression_target:
        return logits.squeeze(-1).float().numpy(), sample["target"].view(-1).float().numpy()
    return logits.argmax(-1).numpy(), sample["target"].view(-1).numpy()


TINY_ELECTRA_OVERRIDES = [
    "model.electra_layers=2",
    "model.electra_gen_layers=2",
    "model.electra_embed_dim=16",
    "model.electra_hidden_dim=32",
    "model.electra_heads=2",
    "model.electra_ffn_dim=64",
    "model.electra_gen_hidden_dim=16",
    "model.electra_gen_heads=1",
    "model.electra_gen_ffn_dim=32",
    "model.electra_max_positions=64",
    "task.max_positions=64",
    "common.cpu=true",
    "dataset.num_workers=0",
    "optimization.max_epoch=2",
    "common.log_interval=1",
]
METRIC = {
    "CoLA": r"\| mcc -?[\d.]+",
    "STS-B": r"\| pearson_and_spearman -?[\d.]+",
    "MRPC": r"\| acc_and_f1 [\d.]+",
    "QQP": r"\| acc_and_f1 [\d.]+",
}


class FineTunes:
    """Each GLUE task fine-tuned once per module through examples/glue/finetune.sh (fp32, CPU)
    from a tiny pre-trained ELECTRA, on all eight tasks prepared by prepare_glue.py: a test asks
    for the runs it reads, in any order, and a run already made is not made again."""

    def __init__(self, root, glue_dir, corpus_dir, data_bin):
        from fairseq_runs import TINY_ELECTRA, fairseq_train

        self.root = root
        fairseq_train(
            data_bin,
            root / "pre",
            [
                *TINY_ELECTRA,
                "--task",
                "electra",
                "--criterion",
                "mlm_hard_correction",
                "--synonym-table",
                "synonyms.npz",
                "--max-update",
                "2",
            ],
        )
        self.bin = root / "glue-bin"
        proc = run_script(
            "prepare_glue.py",
            [
                "--glue-dir",
                str(glue_dir),
                "--output-dir",
                str(self.bin),
                "--tasks",
                *TASKS,
                "--dict",
                str(data_bin / "dict.txt"),
                "--tokenizer",
                "sentencepiece",
                "--spm-model",
                str(corpus_dir / "spm.model"),
            ],
        )
        assert proc.returncode == 0, proc.stderr
        self.runs = root / "runs"
        self.done = set()

    def run(self, task):
        """SAVE_DIR of ``task``'s fine-tuning (its train.log, checkpoint_best.pt)."""
        from command_runs import run_recipe

        if task not in self.done:
            r = run_recipe(
                "glue/finetune.sh",
                [
                    task,
                    "small",
                    str(self.bin),
                    str(self.root / "pre" / "checkpoint_last.pt"),
                    *TINY_ELECTRA_OVERRIDES,
                ],
                self.root,
                SAVE_DIR=str(self.runs / task),
                BSZ="8",
            )
            assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
            self.done.add(task)
        return self.runs / task


@pytest.fixture(scope="module")
def finetunes(glue_dir, corpus_dir, data_bin, synonym_table, tmp_path_factory):
    return FineTunes(tmp_path_factory.mktemp("finetunes"), glue_dir, corpus_dir, data_bin)


@pytest.mark.slow
@pytest.mark.parametrize("task", list(TASKS))
def test_finetune_recipe(finetunes, task):
    """Every task's recipe config fine-tunes and logs its metric; MNLI validates on both dev
    sets; the logged CoLA MCC and STS-B Pearson/Spearman equal scikit-learn's / scipy's on the
    best checkpoint's predictions."""
    text = (finetunes.run(task) / "train.log").read_text()
    assert re.search(METRIC.get(task, r"\| accuracy [\d.]+"), text), text[-2000:]
    if task == "MNLI":
        assert "valid on 'valid1' subset" in text  # dev_mismatched
    if task not in ("CoLA", "STS-B"):
        return
    preds, targets = predict_valid(
        finetunes.runs / task / "checkpoint_best.pt", finetunes.bin / task
    )
    if task == "CoLA":
        metric, expect = "mcc", 100 * matthews_corrcoef(targets, preds)
    else:
        metric, expect = (
            "pearson_and_spearman",
            100 * (pearsonr(preds, targets)[0] + spearmanr(preds, targets)[0]) / 2,
        )
    logged = [float(m) for m in re.findall(rf"\| {metric} (-?[\d.]+)", text)]
    assert round(expect, 1) == pytest.approx(max(logged), abs=0.051), (task, expect, logged)


@pytest.mark.slow
def test_glue_table_of_the_eight_runs(finetunes):
    """glue_table.py gathers the Table-3 row from the eight fine-tuning logs."""
    for task in TASKS:
        finetunes.run(task)
    table = run_script("glue_table.py", [str(finetunes.runs), "--name", "tiny"])
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.strip().splitlines()
    cols = [c.strip() for c in header.split("|")]
    assert cols == [
        "model",
        "CoLA",
        "SST-2",
        "MRPC",
        "STS-B",
        "QQP",
        "MNLI-m/mm",
        "QNLI",
        "RTE",
        "Avg",
    ]
    cells = dict(zip(cols, (c.strip() for c in row.split("|"))))
    assert cells["model"] == "tiny" and re.fullmatch(r"-?[\d.]+/-?[\d.]+", cells["MNLI-m/mm"])
    assert re.fullmatch(r"[\d.]+ \([\d.]+\)", cells["MRPC"])  # accuracy (F1)


def test_prepare_with_gpt2_bpe(glue_dir, tmp_path):
    from corpus_fixtures import write_toy_gpt2_bpe

    bpe = write_toy_gpt2_bpe(tmp_path / "bpe")
    out = tmp_path / "glue-bin"
    proc = run_script(
        "prepare_glue.py",
        [
            "--glue-dir",
            str(glue_dir),
            "--output-dir",
            str(out),
            "--tasks",
            "RTE",
            "--dict",
            str(bpe / "dict.txt"),
            "--tokenizer",
            "gpt2",
            "--gpt2-encoder-json",
            str(bpe / "encoder.json"),
            "--gpt2-vocab-bpe",
            str(bpe / "vocab.bpe"),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(out / "RTE" / "input0" / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(out / "RTE" / "input0" / "train"), d)
    first = ds[0].tolist()
    assert d.unk() not in first  # every BPE id is in the dictionary
    enc = json.loads((bpe / "encoder.json").read_text())
    assert d.index(str(enc["the"])) == first[0]  # sentence-initial 'the' has no space mark
    assert any(
        d.index(str(enc["\u0120the"])) in ds[i].tolist() for i in range(len(ds))
    )  # '... near the small lake'
