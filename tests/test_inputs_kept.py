"""Commands never replace one of their inputs. Those that write an output directory
(prepare_glue, make_cline_data, perturb) pass their inputs to the output writer, and an input the
run would overwrite is one error naming its flag, before anything changes. Every output file flag
of every command (glue_predict, evaluate_mlm, word_vectors, cline_hits, squad_predict,
build_synonym_table, hf_train --build-synonyms, perturb squad) is refused when it is an input the
command reads -- named by a flag or read from a data directory or beside a checkpoint, under its
own name, through a symbolic link or a hard link -- with one error naming both flags, and the
input stays byte for byte."""

import os
import shutil

import pytest
from command_runs import run_script, snapshot
from corpus_fixtures import tiny_corpus_lines
from glue_fixtures import write_glue


def test_prepare_glue_refuses_a_dict_inside_its_output(tmp_path, corpus_dir, data_bin):
    glue = write_glue(tmp_path / "glue")
    out = tmp_path / "glue-bin"
    common = ["--glue-dir", str(glue), "--tasks", "RTE", "--output-dir", str(out)]
    tok = ["--tokenizer", "sentencepiece", "--spm-model", str(corpus_dir / "spm.model")]
    first = run_script("prepare_glue.py", [*common, "--dict", str(data_bin / "dict.txt"), *tok])
    assert first.returncode == 0, first.stderr
    # the first run's copy of the dictionary given as the input of a run into the same output
    inside = out / "RTE" / "input0" / "dict.txt"
    before = snapshot(out)
    proc = run_script("prepare_glue.py", [*common, "--dict", str(inside), *tok])
    assert proc.returncode == 2, proc.stderr
    assert f"--dict {inside} would be overwritten" in proc.stderr
    assert "Traceback" not in proc.stderr
    # the same file under another name outside the output (a hard link)
    link = tmp_path / "dict-link.txt"
    os.link(inside, link)
    proc = run_script("prepare_glue.py", [*common, "--dict", str(link), *tok])
    assert proc.returncode == 2 and f"--dict {link} would be overwritten" in proc.stderr
    assert snapshot(out) == before


def test_make_cline_data_refuses_inputs_inside_its_output(tmp_path, corpus_dir):
    out = tmp_path / "cline"
    src = tmp_path / "s.txt"
    src.write_text("\n".join(tiny_corpus_lines(60, seed=3)) + "\n")
    spm = ["--spm-model", str(corpus_dir / "spm.model"), "--output-dir", str(out)]
    first = run_script("make_cline_data.py", ["--input", str(src), "--valid-fraction", "0.1", *spm])
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    # the split text it wrote, given back as --input: the new split would replace it
    split = out / "raw" / "train.txt"
    proc = run_script("make_cline_data.py", ["--input", str(split), *spm])
    assert proc.returncode == 2 and f"--input {split} would be overwritten" in proc.stderr
    # its dictionary as --dict (old spelling --srcdict): the data-bin writer refuses it
    d = out / "data-bin" / "dict.txt"
    proc = run_script("make_cline_data.py", ["--train", str(src), "--srcdict", str(d), *spm])
    assert proc.returncode == 2 and f"--dict {d} would be overwritten" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(out) == before


def test_perturb_glue_never_writes_into_its_input(tmp_path):
    glue = write_glue(tmp_path / "glue")
    task = glue / "RTE"
    before = snapshot(glue)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(task / "swapped")])
    assert proc.returncode == 2 and f"is inside the input folder {task}" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(task)])
    assert proc.returncode == 2 and "is the input" in proc.stderr
    assert snapshot(glue) == before and not (task / "swapped").exists()
    # beside the input it works, and the input stays as it was
    out = tmp_path / "swap"
    proc = run_script("perturb.py", ["glue", "--task", "RTE", str(task), str(out)])
    assert proc.returncode == 0, proc.stderr
    assert (out / "dev.tsv").is_file() and snapshot(glue) == before
    # an input kept inside that earlier output stays whole when the output is written again
    inside = out / "RTE-copy"
    shutil.copytree(task, inside)
    proc = run_script("perturb.py", ["glue", "--task", "RTE", "--seed", "2", str(inside), str(out)])
    assert proc.returncode == 0, proc.stderr
    assert snapshot(inside) == snapshot(task)


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


# ---- one output file per command ---------------------------------------------------------


def _refused(script, argv, flag, other, kept):
    """``script argv`` ends with one error naming ``flag`` and the input ``other``; the files
    ``kept`` hold the same bytes as before."""
    before = {p: p.read_bytes() for p in kept}
    proc = run_script(script, [str(a) for a in argv])
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert f"error: {flag} " in proc.stderr and f"is the {other} input" in proc.stderr, proc.stderr
    assert {p: p.read_bytes() for p in kept} == before
    return proc


def _links(tmp_path, target):
    """``target`` itself, a symbolic link and a hard link to it."""
    sym, hard = tmp_path / f"sym-{target.name}", tmp_path / f"hard-{target.name}"
    sym.symlink_to(target)
    os.link(target, hard)
    return [target, sym, hard]


def _fake_glue_task(root):
    """A task folder as truneg-prepare-glue writes it (the files are not read before the refusal)."""
    for sub in ("input0", "label"):
        (root / sub).mkdir(parents=True)
        (root / sub / "dict.txt").write_text("a 1\nb 1\n")
        for ext in ("bin", "idx"):
            (root / sub / f"valid.{ext}").write_bytes(b"\0" * 16)
    ck = root.parent / "checkpoint_best.pt"
    ck.write_bytes(b"a fine-tuned checkpoint")
    return root, ck


def test_glue_predict_refuses_an_output_that_is_an_input(tmp_path):
    data, ck = _fake_glue_task(tmp_path / "SST-2")
    kept = [ck, data / "label" / "dict.txt", data / "input0" / "valid.bin"]
    base = [ck, "--data", data, "--device", "cpu", "--output"]
    for out in _links(tmp_path, ck):
        _refused("glue_predict.py", [*base, out], "--output", "checkpoint", kept)
    for out in kept[1:]:  # read from the data directory
        _refused("glue_predict.py", [*base, out], "--output", "--data", kept)
    assert not (tmp_path / "preds.txt").exists()


def test_evaluate_mlm_refuses_tables_over_its_inputs(tmp_path, data_bin):
    data = tmp_path / "data-bin"
    shutil.copytree(data_bin, data)
    ck = tmp_path / "checkpoint_last.pt"
    ck.write_bytes(b"a checkpoint")
    table = tmp_path / "synonyms.npz"
    table.write_bytes(b"a table")
    kept = [ck, data / "dict.txt", data / "valid.bin", table]
    base = ["--data", data, "--synonym-table", table, ck]
    for out in _links(tmp_path, ck):
        _refused(
            "evaluate_mlm.py", [*base, "--table-json", out], "--table-json", "checkpoint", kept
        )
    for flag in ("--table-json", "--table-md"):
        _refused("evaluate_mlm.py", [*base, flag, ck], flag, "checkpoint", kept)
        _refused("evaluate_mlm.py", [*base, flag, data / "dict.txt"], flag, "--data", kept)
        _refused("evaluate_mlm.py", [*base, flag, data / "valid.idx"], flag, "--data", kept)
        _refused("evaluate_mlm.py", [*base, flag, table], flag, "--synonym-table", kept)
    # an imported model's directory stands for its files
    imp = tmp_path / "imported"
    imp.mkdir()
    for name in ("model.pt", "dict.txt", "vocab.txt"):
        (imp / name).write_text(name)
    text = tmp_path / "text.txt"
    text.write_text("the farmer will stay .\n")
    base = ["--text", text, imp, "--table-md"]
    for name in ("model.pt", "vocab.txt"):
        _refused("evaluate_mlm.py", [*base, imp / name], "--table-md", "checkpoint", [imp / name])
    _refused("evaluate_mlm.py", [*base, text], "--table-md", "--text", [text])
    # both tables into one file
    both = [*map(str, base[:-1]), "--table-md", str(tmp_path / "t"), "--table-json"]
    proc = run_script("evaluate_mlm.py", [*both, str(tmp_path / "t")])
    assert proc.returncode == 2 and "--table-json" in proc.stderr
    assert "is also the --table-md output" in proc.stderr


def test_word_vectors_refuses_an_output_that_is_its_dict_or_text(tmp_path, data_bin):
    d = tmp_path / "dict.txt"
    shutil.copyfile(data_bin / "dict.txt", d)
    text = tmp_path / "train.txt"
    text.write_text("\n".join(tiny_corpus_lines(20)) + "\n")
    base = ["--dict", d, "--text", text, "--dim", "4", "--output"]
    for out in _links(tmp_path, d):
        _refused("word_vectors.py", [*base, out], "--output", "--dict", [d, text])
    _refused("word_vectors.py", [*base, text], "--output", "--text", [d, text])


def test_cline_hits_refuses_saving_triplets_over_its_inputs(tmp_path, corpus_dir):
    sentences = tmp_path / "valid.txt"
    sentences.write_text("\n".join(tiny_corpus_lines(20)) + "\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    ck = tmp_path / "checkpoint_last.pt"
    ck.write_bytes(b"a checkpoint")
    spm = corpus_dir / "spm.model"
    kept = [sentences, data / "dict.txt", ck, spm]
    base = [ck, "--data", data, "--sentences", sentences, "--spm-model", spm]
    for out in _links(tmp_path, sentences):
        _refused(
            "cline_hits.py", [*base, "--save-triplets", out], "--save-triplets", "--sentences", kept
        )
    _refused("cline_hits.py", [*base, "--save-triplets", ck], "--save-triplets", "checkpoint", kept)
    _refused("cline_hits.py", [*base, "--json", data / "dict.txt"], "--json", "--data", kept)
    _refused("cline_hits.py", [*base, "--json", spm], "--json", "--spm-model", kept)


def test_squad_predict_refuses_an_output_that_is_its_data(tmp_path):
    data = tmp_path / "squad-data"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    (data / "valid.json").write_text("{}")
    ck = tmp_path / "checkpoint_best.pt"
    ck.write_bytes(b"a checkpoint")
    kept = [ck, data / "dict.txt", data / "valid.json"]
    base = [ck, "--data", data, "--output"]
    _refused("squad_predict.py", [*base, ck], "--output", "checkpoint", kept)
    for out in _links(tmp_path, data / "valid.json"):
        _refused("squad_predict.py", [*base, out], "--output", "--data", kept)


def test_build_synonym_table_refuses_its_tokenizer_files_and_their_record(
    tmp_path, corpus_dir, data_bin
):
    d = tmp_path / "dict.txt"
    shutil.copyfile(data_bin / "dict.txt", d)
    record = tmp_path / "tokenizer_fingerprint.json"
    record.write_text("{}")
    spm = tmp_path / "spm.model"
    shutil.copyfile(corpus_dir / "spm.model", spm)
    base = ["--dict", d, "--tokenizer", "sentencepiece", "--spm-model", spm, "--output"]
    kept = [d, record, spm]
    os.link(d, tmp_path / "hard-dict")
    _refused("build_synonym_table.py", [*base, tmp_path / "hard-dict"], "--output", "--dict", kept)
    _refused("build_synonym_table.py", [*base, record], "--output", "--dict", kept)
    _refused("build_synonym_table.py", [*base, spm], "--output", "--spm-model", kept)


def test_hf_train_refuses_a_synonym_table_over_its_model_files(tmp_path):
    from hf_fixtures import save_bert

    model = tmp_path / "bert"
    save_bert(model)
    kept = sorted(p for p in model.iterdir() if p.is_file())
    for name in ("vocab.txt", "config.json"):
        out = model / name
        _refused(
            "hf_train.py", [model, "--build-synonyms", out], "--build-synonyms", "MODEL_DIR", kept
        )


def test_hf_train_refuses_an_output_dir_holding_its_inputs(tmp_path):
    from hf_fixtures import save_bert

    model = tmp_path / "bert"
    save_bert(model)
    text = tmp_path / "train.txt"
    text.write_text("a sentence to learn from\n")
    kept = sorted(p for p in model.iterdir() if p.is_file()) + [text]
    train = ["--train", text, "--max-steps", "1"]
    # the final model would replace the model it starts from
    _refused(
        "hf_train.py", [model, *train, "--output-dir", model], "--output-dir", "MODEL_DIR", kept
    )
    # a folder of text read as --train, written into as --output-dir (its vocab.txt)
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "vocab.txt").write_text("more text\n")
    kept.append(folder / "vocab.txt")
    argv = [model, "--train", folder, "--max-steps", "1", "--output-dir", folder]
    _refused("hf_train.py", argv, "--output-dir", "--train", kept)


def test_perturb_squad_refuses_a_link_to_its_input(tmp_path):
    import json

    from squad_fixtures import squad_json

    src = tmp_path / "dev.json"
    src.write_text(json.dumps(squad_json()))
    for out in _links(tmp_path, src):
        before = src.read_bytes()
        proc = run_script(
            "perturb.py", ["squad", "--method", "swap_syn_wordnet", str(src), str(out)]
        )
        assert proc.returncode == 2 and "is the input" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and src.read_bytes() == before


def _read_refused(script, argv, flag, what, kept):
    """``script argv`` ends with one error naming ``flag`` and the input it found to be
    ``what`` as it read it; the files ``kept`` hold the same bytes as before."""
    before = {p: p.read_bytes() for p in kept}
    proc = run_script(script, [str(a) for a in argv])
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {flag} ") and f"is {what}" in line, line
    assert "which this run reads" in line and "nothing was written" in line, line
    assert {p: p.read_bytes() for p in kept} == before


def test_evaluate_mlm_refuses_tables_over_what_a_checkpoint_leads_it_to_read(tmp_path, data_bin):
    """The data directory a checkpoint records (its dict.txt), read with --data OTHER, with and
    without the dictionary record, named as itself or through a hard or symbolic link."""
    import torch
    from fairseq_runs import TINY_ROBERTA, fairseq_train

    from truneg_fairseq.compat import RECORDS

    recorded, other = tmp_path / "recorded", tmp_path / "other"
    shutil.copytree(data_bin, recorded)
    shutil.copytree(data_bin, other)
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    fairseq_train(recorded, tmp_path / "run", [*args, "--disable-validation"])
    ck = tmp_path / "run" / "checkpoint_last.pt"
    state = torch.load(ck, weights_only=False)
    del state["extra_state"][RECORDS]["dictionary"]
    torch.save(state, tmp_path / "older.pt")  # as saved before checkpoints recorded it
    kept = [recorded / "dict.txt", other / "dict.txt", ck]
    what = "the dictionary of the data directory"
    for checkpoint in (ck, tmp_path / "older.pt"):
        (tmp_path / checkpoint.stem).mkdir()
        for out in _links(tmp_path / checkpoint.stem, recorded / "dict.txt")[::2]:
            base = ["--data", other, "--device", "cpu", checkpoint]
            _read_refused("evaluate_mlm.py", [*base, "--table-md", out], "--table-md", what, kept)
        sym = tmp_path / checkpoint.stem / "sym-dict.txt"
        base = ["--data", other, "--device", "cpu", checkpoint, "--table-md", tmp_path / "t.md"]
        _read_refused("evaluate_mlm.py", [*base, "--table-json", sym], "--table-json", what, kept)
    assert not (tmp_path / "t.md").exists()


def test_an_input_found_while_reading_is_refused_as_an_output(tmp_path):
    from truneg_fairseq.outputs import (
        InputAsOutputError,
        begin_run,
        declare_outputs,
        end_run,
        reading,
        refuse_read_outputs,
    )

    out, other = tmp_path / "out.json", tmp_path / "other.txt"
    out.write_text("x")
    other.write_text("y")
    begin_run()
    try:
        declare_outputs({"--json": out, "--md": None})
        reading(other, "text file")
        with pytest.raises(InputAsOutputError, match=r"--json .*out\.json is the synonym table"):
            reading(out, "synonym table")
        hard = tmp_path / "hard.txt"
        os.link(other, hard)
        with pytest.raises(Exception, match=r"--md .*hard\.txt is the text file input"):
            refuse_read_outputs({"--md": hard})
    finally:
        end_run()
    reading(out, "synonym table")  # no command running: nothing declared
