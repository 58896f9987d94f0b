"""Commands that write an output directory never replace one of their inputs: prepare_glue,
make_cline_data and perturb pass their inputs to the output writer, and an input the run would
overwrite is one error naming its flag, before anything changes; build_synonym_table refuses an
--output that is its --dict."""

import shutil

from glue_fixtures import write_glue
from utils import run_script, tiny_corpus_lines


def _snapshot(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_prepare_glue_refuses_a_dict_inside_its_output(tmp_path, corpus_dir, data_bin):
    glue = write_glue(tmp_path / "glue")
    out = tmp_path / "glue-bin"
    common = ["--glue-dir", str(glue), "--tasks", "RTE", "--output-dir", str(out)]
    tok = ["--tokenizer", "sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    first = run_script("prepare_glue.py", [*common, "--dict", str(data_bin / "dict.txt"), *tok])
    assert first.returncode == 0, first.stderr
    # the first run's copy of the dictionary given as the input of a run into the same output
    inside = out / "RTE" / "input0" / "dict.txt"
    before = _snapshot(out)
    proc = run_script("prepare_glue.py", [*common, "--dict", str(inside), *tok])
    assert proc.returncode == 2, proc.stderr
    assert f"--dict {inside} would be overwritten" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(out) == before


def test_make_cline_data_refuses_inputs_inside_its_output(tmp_path, corpus_dir):
    out = tmp_path / "cline"
    src = tmp_path / "s.txt"
    src.write_text("\n".join(tiny_corpus_lines(60, seed=3)) + "\n")
    spm = ["--spm-model", str(corpus_dir / "spm.model"), "--output-dir", str(out)]
    first = run_script("make_cline_data.py", ["--input", str(src), "--valid-fraction", "0.1", *spm])
    assert first.returncode == 0, first.stderr
    before = _snapshot(out)
    # the split text it wrote, given back as --input: the new split would replace it
    split = out / "raw" / "train.txt"
    proc = run_script("make_cline_data.py", ["--input", str(split), *spm])
    assert proc.returncode == 2 and f"--input {split} would be overwritten" in proc.stderr
    # its dictionary as --dict (old spelling --srcdict): the data-bin writer refuses it
    d = out / "data-bin" / "dict.txt"
    proc = run_script("make_cline_data.py", ["--train", str(src), "--srcdict", str(d), *spm])
    assert proc.returncode == 2 and f"--dict {d} would be overwritten" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(out) == before


def test_perturb_glue_never_writes_into_its_input(tmp_path):
    glue = write_glue(tmp_path / "glue")
    task = glue / "RTE"
    before = _snapshot(glue)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(task / "swapped")])
    assert proc.returncode == 2 and f"is inside the input folder {task}" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(task)])
    assert proc.returncode == 2 and "is the input" in proc.stderr
    assert _snapshot(glue) == before and not (task / "swapped").exists()
    # beside the input it works, and the input stays as it was
    out = tmp_path / "swap"
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(out)])
    assert proc.returncode == 0, proc.stderr
    assert (out / "dev.tsv").is_file() and _snapshot(glue) == before
    # an input kept inside that earlier output stays whole when the output is written again
    inside = out / "RTE-copy"
    shutil.copytree(task, inside)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", "--seed", "2", str(inside), str(out)])
    assert proc.returncode == 0, proc.stderr
    assert _snapshot(inside) == _snapshot(task)


def test_build_synonym_table_refuses_an_output_that_is_its_dict(tmp_path, corpus_dir, data_bin):
    d = tmp_path / "dict.txt"
    shutil.copyfile(data_bin / "dict.txt", d)
    link = tmp_path / "table.npz"
    link.symlink_to(d)  # the same file under another name
    for out in (d, link):
        proc = run_script(
            "build_synonym_table.py",
            ["--dict", str(d), "--tokenizer", "sentencepiece"]
            + ["--spm-model", str(corpus_dir / "spm.model"), "--output", str(out)],
        )
        assert proc.returncode == 2 and f"--output {out} is the --dict input" in proc.stderr
        assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert d.read_bytes() == (data_bin / "dict.txt").read_bytes()
