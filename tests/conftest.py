import os

import pytest
from corpus_fixtures import make_corpus

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per worker (pytest-xdist runs one worker per core): torch in this process and
    # every command a test starts
    import torch

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def datasets_cache(tmp_path_factory):
    """datasets' cache (where truneg-hf-train keeps the tokenized text unless given --cache-dir)
    in the session's temporary directory, for this process and the commands it starts, not in
    the home directory."""
    path = tmp_path_factory.mktemp("datasets-cache")
    os.environ["HF_DATASETS_CACHE"] = str(path)
    return path


@pytest.fixture(scope="session")
def wn():
    from truneg_fairseq.lexicon import load_wordnet

    return load_wordnet()


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """A real tiny corpus: sentencepiece model + fairseq data-bin (shared, read-only)."""
    work = tmp_path_factory.mktemp("corpus")
    make_corpus(work)
    return work


@pytest.fixture(scope="session")
def data_bin(corpus_dir):
    return corpus_dir / "data-bin"


@pytest.fixture(scope="session")
def synonym_table(corpus_dir, data_bin, wn):
    """WordNet synonym table for the tiny corpus's dictionary, saved inside data-bin."""
    from truneg_fairseq.lexicon import build_table, vocab_view

    view = vocab_view(data_bin / "dict.txt", "sentencepiece", spm_model=corpus_dir / "spm.model")
    table, _ = build_table(view, source="wordnet", wn=wn)
    path = data_bin / "synonyms.npz"
    table.save(path)
    return path


@pytest.fixture(scope="session")
def hf_bert_dir(tmp_path_factory):
    """A tiny random BERT masked-LM saved with transformers (tests/hf_fixtures.py)."""
    from hf_fixtures import save_bert

    root = tmp_path_factory.mktemp("hf")
    save_bert(root / "bert")
    return root / "bert"


@pytest.fixture(scope="session")
def imported_bert(hf_bert_dir, tmp_path_factory):
    """``hf_bert_dir`` imported as a fairseq checkpoint directory (model.pt, dict.txt, ...)."""
    from truneg_fairseq.convert.hf import import_hf

    return import_hf(hf_bert_dir, tmp_path_factory.mktemp("imp") / "imported")


@pytest.fixture(scope="session")
def plain_checkpoint(data_bin, tmp_path_factory):
    """A RoBERTa checkpoint of one update, fairseq's masked_lm (plain data, as fairseq saves it)."""
    from fairseq_runs import TINY_ROBERTA, fairseq_train

    save = tmp_path_factory.mktemp("plain") / "run"
    fairseq_train(data_bin, save, [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"])
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def imported_wordpiece(tmp_path_factory):
    """A tiny WordPiece BERT saved with transformers (``hf/``) and imported by
    ``convert_hf.py import`` (``out/``): their common root."""
    from command_runs import run_script
    from hf_fixtures import save_bert, wordpiece_vocab

    root = tmp_path_factory.mktemp("imp")
    save_bert(root / "hf", vocab=wordpiece_vocab())
    proc = run_script("convert_hf.py", ["import", str(root / "hf"), str(root / "out")])
    assert proc.returncode == 0, proc.stderr
    return root
