"""The HF path's training step: no host-device sync added by the objectives (a dispatch-mode
detector over the forward and backward, the HF encoders' own passes left out), every parameter
of the pair reached by the one forward, the collator's masks fixed by (seed, epoch, example
index) whatever the batch, and ``import truneg_fairseq`` free of transformers."""

import subprocess
import sys

import pytest
import torch
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import bert_config, save_electra_pair, wordpiece_vocab, write_vocab
from objective_cases import objective_cases
from torch.utils._python_dispatch import TorchDispatchMode

from truneg_fairseq.core import objectives

# operators that make the host wait for the device (a value or a data-dependent shape read back)
SYNC_OPS = {"_local_scalar_dense", "nonzero", "item", "is_nonzero", "equal", "masked_select"}


class SyncDetector(TorchDispatchMode):
    """Records the sync operators run while no paused module is running."""

    def __init__(self):
        super().__init__()
        self.found, self.paused = [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in SYNC_OPS and not self.paused:
            self.found.append(name)
        return func(*args, **(kwargs or {}))

    def pause_inside(self, module):
        """Leave out what ``module``'s forward runs (an HF encoder's own host checks)."""

        def enter(*_):
            self.paused += 1

        def leave(*_):
            self.paused -= 1

        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, wn):
    import transformers

    from truneg_fairseq.hf import MaskedLMCollator, build_synonym_table, tokenize_lines

    root = tmp_path_factory.mktemp("hf_step")
    vocab = wordpiece_vocab()
    transformers.BertForMaskedLM(bert_config(len(vocab))).save_pretrained(str(root))
    write_vocab(root, vocab)
    tok = transformers.AutoTokenizer.from_pretrained(str(root))
    table, _ = build_synonym_table(tok, wn=wn)
    ids = tokenize_lines(tok, tiny_corpus_lines(12, seed=2), 32)
    features = [{"input_ids": x, "index": i} for i, x in enumerate(ids)]
    return root, tok, table, features, MaskedLMCollator(tok, seed=5)(features)


# every registered objective on BERT, and those that need a discriminator on an ELECTRA pair
# (with the synonym policy's lookup of the samples)
SYNC_CASES = [(*c, False) for c in objective_cases()] + [
    (f"pair-{c[0]}", *c[1:], True)
    for c in objective_cases(discriminator=True)
    if objectives.get(c[1]).needs_discriminator
]


@pytest.mark.parametrize(
    "objective,params,pair", [c[1:] for c in SYNC_CASES], ids=[c[0] for c in SYNC_CASES]
)
def test_no_sync_added_by_the_objective(setup, objective, params, pair, tmp_path):
    from transformers import BertForMaskedLM

    from truneg_fairseq.hf import ElectraPretraining, StatSums, TrueNegativeMLM

    root, tok, table, _, batch = setup
    det = SyncDetector()
    if pair:
        disc, gen = (m.train() for m in save_electra_pair(tmp_path / "d", tmp_path / "g"))
        obj = ElectraPretraining(
            gen, disc, tok, objective, table, rtd_synonym_policy="ignore", **params
        )
        det.pause_inside(disc.electra)
    else:
        obj = TrueNegativeMLM(
            BertForMaskedLM.from_pretrained(str(root)), tok, objective, table, **params
        )
    det.pause_inside(obj.parts.base)
    sums = StatSums()
    with det:
        out = obj(**batch)
        (out["loss"] / out["sample_size"]).backward()
        sums.add(out["logging"])
        sums.add(out["logging"])
    assert det.found == [], det.found
    # the one read-back is at log time
    assert sums.pop()["sample_size"] == 2 * int(out["sample_size"])


def test_the_pair_is_trained_by_one_forward(setup, tmp_path):
    """Every parameter of generator and discriminator gets a gradient from one forward call
    (what DDP with find_unused_parameters=False needs), the embeddings shared."""
    from truneg_fairseq.hf import ElectraPretraining

    _, tok, table, _, batch = setup
    disc, gen = (m.train() for m in save_electra_pair(tmp_path / "d", tmp_path / "g"))
    obj = ElectraPretraining(gen, disc, tok, "soft_reg", table)
    obj(**batch)["loss"].backward()
    missing = [n for n, p in obj.named_parameters() if p.grad is None]
    assert missing == [] and obj.shared_embeddings


def test_masks_follow_the_example_not_the_batch(setup):
    from truneg_fairseq.hf import MaskedLMCollator

    _, tok, _, features, whole = setup
    col = MaskedLMCollator(tok, seed=5)
    halves = [col(features[:5]), col(features[5:][::-1])]
    rows = {int(f["index"]): i for i, f in enumerate(features)}
    for part, feats in zip(halves, (features[:5], features[5:][::-1])):
        for j, f in enumerate(feats):
            n = len(f["input_ids"])
            i = rows[int(f["index"])]
            assert torch.equal(part["input_ids"][j, :n], whole["input_ids"][i, :n])
            assert torch.equal(part["labels"][j, :n], whole["labels"][i, :n])
    col.set_epoch(1)
    assert not torch.equal(col(features)["labels"], whole["labels"])  # a new epoch, new masks
    labels = whole["labels"]
    special = torch.tensor(tok.all_special_ids)
    masked = labels.ne(-100)
    assert masked.any() and not torch.isin(labels[masked], special).any()  # never a special
    # the slots list each row's masked positions first
    got = torch.gather(labels, 1, whole["mlm_positions"]).ne(-100).sum(1)
    assert torch.equal(got, masked.sum(1))


def test_importing_the_plugin_does_not_import_transformers():
    code = (
        "import sys, truneg_fairseq, truneg_fairseq.hf; "
        "print('transformers' in sys.modules, 'accelerate' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]


def test_another_collators_batch_gives_the_same_loss(setup):
    """A batch without prediction slots (transformers' own DataCollatorForLanguageModeling
    gives labels only) is scored at every position: the same loss and counts as with slots."""
    from transformers import BertForMaskedLM

    from truneg_fairseq.hf import TrueNegativeMLM

    root, tok, table, _, batch = setup
    obj = TrueNegativeMLM(BertForMaskedLM.from_pretrained(str(root)), tok, "hard_correction", table)
    with torch.no_grad():
        a = obj(**batch)
        b = obj(**{k: v for k, v in batch.items() if k != "mlm_positions"})
    assert torch.allclose(a["loss"], b["loss"], rtol=1e-5)
    for k in ("sample_size", "fn_masked", "fn_correct", "fn_synonym", "fn_masked_sequences"):
        assert int(a["logging"][k]) == int(b["logging"][k]), k


def test_a_byte_level_bpe_vocabulary_gets_its_table(tmp_path, wn):
    """RoBERTa's byte-level BPE: 'Ġ' starts a word, other entries continue one, the specials
    are neither; WordNet pairs come out between whole-word entries."""
    import json

    from transformers import RobertaTokenizer

    from truneg_fairseq.hf import build_synonym_table, hf_vocab_view

    entries = ["<s>", "<pad>", "</s>", "<unk>", "Ġprimary", "Ġmain", "Ġchief", "Ġthe"]
    entries += ["m", "a", "i", "n", "ma", "in"]
    vocab = {t: i for i, t in enumerate(entries + ["<mask>"])}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\nm a\ni n\n")
    tok = RobertaTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    view = hf_vocab_view(tok)
    assert view.tokenizer == "gpt2"
    assert view.words[vocab["Ġmain"]] == "main" and view.words[vocab["<s>"]] is None
    assert view.continuation[vocab["ma"]] and not view.continuation[vocab["<mask>"]]
    table, _ = build_synonym_table(tok, wn=wn)
    assert vocab["Ġmain"] in table.synonyms_of(vocab["Ġprimary"])
    assert vocab["Ġthe"] not in table.content_ids.tolist()  # a stopword


def test_whole_word_masking_selects_a_words_pieces_together(setup):
    from truneg_fairseq.hf import MaskedLMCollator, tokenize_lines

    _, tok, _, _, _ = setup
    ids = tokenize_lines(tok, tiny_corpus_lines(80, seed=9), 32)  # rare words split into pieces
    cont = torch.tensor(
        [t.startswith("##") for t in tok.convert_ids_to_tokens(list(range(len(tok))))]
    )
    col = MaskedLMCollator(tok, mask_prob=0.4, whole_words=True)
    batch = col([{"input_ids": x, "index": i} for i, x in enumerate(ids)])
    original = torch.zeros_like(batch["input_ids"])
    for i, x in enumerate(ids):
        original[i, : len(x)] = torch.tensor(x)
    selected = batch["labels"].ne(-100)
    pieces = cont[original] & batch["attention_mask"].bool()
    assert pieces.any()
    # a continuation piece is selected exactly when the piece before it is
    assert torch.equal(selected[:, 1:][pieces[:, 1:]], selected[:, :-1][pieces[:, 1:]])
    assert selected[pieces].any()


def test_padding_rows_fill_batches_and_count_nowhere(setup):
    """The order of an epoch is the same in every process and filled up to batch x processes
    with marked repeats; the collator leaves marked rows out (a batch of them only: one
    stand-in row without labels, flagged)."""
    from truneg_fairseq.hf import MaskedLMCollator
    from truneg_fairseq.hf.sharding import PADDING_ONLY, EpochOrder, PaddedRows

    _, tok, _, features, whole = setup
    order = EpochOrder(len(features), seed=3, multiple=8)  # 12 examples -> 16 entries
    first = list(order)
    assert len(order) == len(first) == 16 and sorted(first[:12]) == list(range(12))
    assert first[12:] == [12 + i for i in first[:4]]  # the epoch's first examples, marked
    assert list(order) == first  # the same order again (in another process)
    order.set_epoch(1)
    assert list(order)[:12] != first[:12]  # another epoch, another order
    assert list(EpochOrder(12, 3, 1, shuffle=False)) == list(range(12))
    # held as int32 (4 bytes an example), it is torch's int64 permutation of the same seed
    drawn = torch.randperm(12, generator=torch.Generator().manual_seed(3 + 1)).tolist()
    assert list(order)[:12] == drawn

    data = PaddedRows(features)
    col = MaskedLMCollator(tok, seed=5)
    mixed = col([data[0], data[1], data[12 + 2], data[12 + 3]])
    alone = col([data[0], data[1]])
    assert PADDING_ONLY not in mixed and mixed.keys() == alone.keys()
    for k in alone:
        assert torch.equal(mixed[k], alone[k]), k
    assert torch.equal(
        alone["labels"][0, : len(features[0]["input_ids"])],
        whole["labels"][0, : len(features[0]["input_ids"])],
    )
    stand_in = col([data[12 + 4], data[12 + 5]])
    assert stand_in[PADDING_ONLY] is True and stand_in["input_ids"].shape[0] == 1
    assert stand_in["labels"].eq(-100).all()
