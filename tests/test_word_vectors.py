"""Count-based word vectors (scripts/word_vectors.py) and the model option that starts the token
embeddings from them (--truneg-embed-init): real fairseq-train runs on a real binarized corpus."""

import numpy as np
import pytest
import torch
from command_runs import run_script
from fairseq_runs import TINY_ELECTRA, TINY_TN_ROBERTA, fairseq_train

# "big" and "large" share every context, "cat" and "dog" share theirs; the two groups never meet
LINES = [
    "the big house stood there",
    "the large house stood there",
    "a big tree grew here",
    "a large tree grew here",
    "my cat ate fish today",
    "my dog ate fish today",
    "the cat chased mice",
    "the dog chased mice",
] * 25


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    from truneg_fairseq.data import corpus_steps

    work = tmp_path_factory.mktemp("vectors")
    corpus_steps.atomic_write_lines(work / "train.txt", LINES)
    corpus_steps.atomic_write_lines(work / "valid.txt", LINES[:8])
    data_bin = corpus_steps.binarize(work / "train.txt", work / "valid.txt", work / "data-bin")
    return work, data_bin


def _cos(v, a, b):
    return float(v[a] @ v[b] / (np.linalg.norm(v[a]) * np.linalg.norm(v[b])))


def test_vectors_put_words_of_the_same_contexts_together(words):
    from fairseq.data import Dictionary

    work, data_bin = words
    out = work / "vec.npy"
    proc = run_script(
        "word_vectors.py",
        [
            "--dict",
            str(data_bin / "dict.txt"),
            "--text",
            str(work / "train.txt"),
            "--dim",
            "4",
            "--window",
            "3",
            "--output",
            str(out),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    v = np.load(out)
    d = Dictionary.load(str(data_bin / "dict.txt"))
    assert v.shape == (len(d) + 1, 4)  # + <mask>, as the masked-LM task adds it
    assert not v[: d.nspecial].any() and not v[-1].any()  # specials and <mask>: zero rows
    i = d.index
    assert _cos(v, i("big"), i("large")) > 0.9 and _cos(v, i("cat"), i("dog")) > 0.9
    assert abs(_cos(v, i("big"), i("cat"))) < 0.5
    rows = sorted({i(w) for line in LINES for w in line.split()})
    assert np.allclose(
        np.linalg.norm(v[rows], axis=1), 1.0, atol=1e-5
    )  # every word that occurs: unit length


@pytest.mark.parametrize("model", ["roberta", "electra"])
def test_training_starts_from_the_vectors_and_checkpoints_do_not_need_the_file(
    words, tmp_path, model
):
    from fairseq.data import Dictionary

    from truneg_fairseq.checkpoints import load_for_inference

    work, data_bin = words
    d = Dictionary.load(str(data_bin / "dict.txt"))
    rng = np.random.default_rng(0)
    dim = 32 if model == "roberta" else 16  # TINY_ELECTRA's --electra-embed-dim
    vec = rng.normal(size=(len(d) + 1, dim)).astype(np.float32)
    vec[: d.nspecial] = 0
    path = tmp_path / "v.npy"
    np.save(path, vec)
    flags = (
        [*TINY_TN_ROBERTA, "--criterion", "masked_lm"]
        if model == "roberta"
        else [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra"]
    )
    init = "--truneg-embed-init" if model == "roberta" else "--electra-embed-init"
    fairseq_train(
        data_bin,
        tmp_path / "run",
        [*flags, "--max-update", "1", "--lr", "1e-12", init, str(path), "--disable-validation"],
    )
    ck = tmp_path / "run" / "checkpoint_last.pt"
    state = torch.load(ck, map_location="cpu", weights_only=False)
    key = {
        "roberta": "encoder.sentence_encoder.embed_tokens.weight",
        "electra": "embeddings.embed_tokens.weight",
    }[model]
    emb = state["model"][key]
    cos = torch.nn.functional.cosine_similarity(
        emb[d.nspecial :], torch.from_numpy(vec[d.nspecial :]), dim=1
    )
    assert cos.min() > 0.999  # every word row is its vector (scaled), after one update at lr 1e-12
    m = state["cfg"]["model"]  # a Namespace (RoBERTa) or a dict (ELECTRA's dataclass)
    assert (
        m.get("electra_embed_init", "absent") if isinstance(m, dict) else m.truneg_embed_init
    ) is None
    path.unlink()  # the checkpoint loads without the file
    models, _, _ = load_for_inference(str(ck), str(data_bin))
    assert torch.allclose(dict(models[0].named_parameters())[key], emb)


def test_vectors_of_another_size_are_one_clear_error(words, tmp_path):
    work, data_bin = words
    path = tmp_path / "v.npy"
    np.save(path, np.ones((7, 32), dtype=np.float32))
    proc = fairseq_train(
        data_bin,
        tmp_path / "run",
        [
            *TINY_TN_ROBERTA,
            "--criterion",
            "masked_lm",
            "--max-update",
            "1",
            "--truneg-embed-init",
            str(path),
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert (
        f"--truneg-embed-init {path}" in proc.stderr and "(7, 32)" in proc.stderr
    )  # the flag, file and sizes
