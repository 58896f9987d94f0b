"""Batched masked-LM batches (``--task batch_masked_lm``, ``--task electra``) against fairseq's
``masked_lm`` on the same binarized corpus: the same blocks and layout, the same masking rates,
and masks fixed by (seed, epoch, block index)."""

import numpy as np
import pytest
import torch

import truneg_fairseq  # noqa: F401  (registration)
from truneg_fairseq.tasks.batch_masked_lm import BatchMaskedLMConfig, BatchMaskedLMTask


def make_task(data_bin, cls=BatchMaskedLMTask, split="train", **kw):
    from fairseq.tasks.masked_lm import MaskedLMConfig

    from truneg_fairseq.tasks.electra import ElectraTask, ElectraTaskConfig

    config = {BatchMaskedLMTask: BatchMaskedLMConfig, ElectraTask: ElectraTaskConfig}.get(
        cls, MaskedLMConfig
    )
    cfg = config(
        data=str(data_bin),
        tokens_per_sample=kw.pop("tokens_per_sample", 64),
        seed=kw.pop("seed", 1),
        **kw,
    )
    task = cls.setup_task(cfg)
    task.load_dataset(split)
    return task


def batches(task, split="train", epoch=1, bsz=16, workers=0):
    itr = task.get_batch_iterator(
        task.dataset(split), max_sentences=bsz, seed=1, num_workers=workers, epoch=epoch
    )
    return itr


def original(sample, pad=1):
    src, tgt = sample["net_input"]["src_tokens"], sample["target"]
    return torch.where(tgt.ne(pad), tgt, src)


def test_same_blocks_order_and_layout_as_masked_lm(data_bin):
    from fairseq.tasks.masked_lm import MaskedLMTask

    ours, theirs = (
        make_task(data_bin, include_target_tokens=True),
        make_task(data_bin, MaskedLMTask, include_target_tokens=True),
    )
    a = list(batches(ours).next_epoch_itr(shuffle=True))
    b = list(batches(theirs).next_epoch_itr(shuffle=True))
    assert len(a) == len(b) > 5
    for x, y in zip(a, b):
        assert x.keys() == y.keys() and x["net_input"].keys() == y["net_input"].keys()
        assert torch.equal(x["id"], y["id"]) and torch.equal(
            x["net_input"]["src_id"], y["net_input"]["src_id"]
        )
        assert torch.equal(x["net_input"]["src_lengths"], y["net_input"]["src_lengths"])
        assert (x["ntokens"], x["nsentences"]) == (y["ntokens"], y["nsentences"])
        assert (
            x["net_input"]["src_tokens"].dtype
            == y["net_input"]["src_tokens"].dtype
            == x["target"].dtype
        )
        assert torch.equal(original(x), original(y))  # the same tokens, masked differently
        assert torch.equal(x["net_input"]["target_tokens"], x["target"])


def _rates(task, epochs):
    d = task.source_dictionary
    n = sel = mask = keep = rand = special = 0
    for epoch in range(1, epochs + 1):
        task.dataset("train").set_epoch(epoch)
        for s in batches(task, epoch=epoch).next_epoch_itr(shuffle=True):
            src, tgt, orig = s["net_input"]["src_tokens"], s["target"], original(s)
            valid, chosen = orig.ne(d.pad()), tgt.ne(d.pad())
            assert not bool((chosen & ~valid).any())  # padding is never selected
            n += int(valid.sum())
            sel += int(chosen.sum())
            mask += int((chosen & src.eq(task.mask_idx)).sum())
            keep += int((chosen & src.eq(orig)).sum())
            replaced = chosen & src.ne(orig) & src.ne(task.mask_idx)
            rand += int(replaced.sum())
            special += int((replaced & src.lt(d.nspecial)).sum())
    return sel / n, mask / sel, keep / sel, rand / sel, special


def test_rates_match_masked_lm(data_bin):
    from fairseq.tasks.masked_lm import MaskedLMTask

    ours = _rates(make_task(data_bin), epochs=4)
    theirs = _rates(make_task(data_bin, MaskedLMTask), epochs=4)
    # ~20k tokens an epoch: 3k selected; 4 epochs keep sampling error near 0.003 (0.15) / 0.005 (0.1)
    assert ours[0] == pytest.approx(0.15, abs=0.005) and theirs[0] == pytest.approx(0.15, abs=0.005)
    for mine, ref, expected in zip(ours[1:4], theirs[1:4], (0.8, 0.1, 0.1)):
        assert mine == pytest.approx(expected, abs=0.015) and mine == pytest.approx(ref, abs=0.025)
    assert ours[4] == theirs[4] == 0  # no special as a random token
    electra = _rates(make_task(data_bin, leave_unmasked_prob=0.15, random_token_prob=0.0), epochs=2)
    assert electra[1] == pytest.approx(0.85, abs=0.02) and electra[3] == 0


def test_exact_count_per_row(data_bin):
    task = make_task(data_bin, mask_prob=0.3)
    for s in batches(task).next_epoch_itr(shuffle=False):
        n = s["net_input"]["src_lengths"].numpy()
        k = s["target"].ne(1).sum(1).numpy()
        assert ((k == np.floor(0.3 * n)) | (k == np.floor(0.3 * n) + 1)).all()


def test_masks_fixed_by_seed_epoch_and_index(data_bin):
    task = make_task(data_bin)
    ds = task.dataset("train")
    ds.set_epoch(1)
    a = ds.collater([ds[i] for i in range(10)])
    b = ds.collater([ds[i] for i in (30, 3, 31, 7)])  # other batches, other widths
    for j, i in ((1, 3), (3, 7)):  # the same block in another batch: the same mask
        n = int(a["net_input"]["src_lengths"][i])
        assert torch.equal(a["net_input"]["src_tokens"][i, :n], b["net_input"]["src_tokens"][j, :n])
        assert torch.equal(a["target"][i, :n], b["target"][j, :n])
    assert torch.equal(ds.collater(list(range(10)))["target"], a["target"])  # again: the same
    ds.set_epoch(2)
    assert not torch.equal(
        ds.collater(list(range(10)))["target"], a["target"]
    )  # a new epoch: new masks
    other = make_task(data_bin, seed=2).dataset("train")
    other.set_epoch(1)
    assert not torch.equal(other.collater(list(range(10)))["target"], a["target"])


@pytest.mark.parametrize("workers", [0, 1])
def test_resume_mid_epoch(data_bin, workers):
    """An epoch interrupted after 3 batches and resumed from the iterator's state (a new task and
    iterator for the saved epoch, as fairseq's checkpoint loading builds them) gives the batches
    of the uninterrupted epoch (workers: the token stream reopened in a loader process)."""
    whole = [
        s
        for s in batches(make_task(data_bin), epoch=2, workers=workers).next_epoch_itr(shuffle=True)
    ]
    itr = batches(make_task(data_bin), epoch=2, workers=workers)
    first = itr.next_epoch_itr(shuffle=True)
    for _ in range(3):
        next(first)
    state = itr.state_dict()
    resumed = batches(make_task(data_bin), epoch=state["epoch"], workers=workers)
    resumed.load_state_dict(state)
    rest = list(resumed.next_epoch_itr(shuffle=True))
    assert len(rest) == len(whole) - 3
    for x, y in zip(rest, whole[3:]):
        assert torch.equal(x["net_input"]["src_tokens"], y["net_input"]["src_tokens"])
        assert torch.equal(x["target"], y["target"])


def test_item_by_item_reading_gives_the_same_batches(data_bin):
    """Blocks that are not a plain token stream (here truncated by --shorten-method, which
    changes nothing at this length) are read one by one, then masked alike."""
    fast = make_task(data_bin).dataset("train")
    slow = make_task(data_bin, shorten_method="truncate").dataset("train")
    assert fast.dataset._blocks is not None and slow.dataset._blocks is None
    for ds in (fast, slow):
        ds.set_epoch(1)
    a, b = fast.collater(list(range(0, 40, 3))), slow.collater(list(range(0, 40, 3)))
    assert torch.equal(a["net_input"]["src_tokens"], b["net_input"]["src_tokens"]) and torch.equal(
        a["target"], b["target"]
    )


def test_whole_words(corpus_dir, data_bin):
    """With --mask-whole-words (on --task electra, given the corpus's sentencepiece model), the
    pieces of a word are selected together and each row selects int(p * words + u) words."""
    from truneg_fairseq.tasks.electra import ElectraTask

    task = make_task(
        data_bin,
        ElectraTask,
        mask_whole_words=True,
        mask_prob=0.3,
        electra_tokenizer="sentencepiece",
        electra_spm_model=str(corpus_dir / "spm.model"),
    )
    d = task.source_dictionary
    begins = torch.tensor(
        [i < d.nspecial or d[i].startswith("\u2581") or d[i] == "<mask>" for i in range(len(d))]
    )
    pieces_masked = 0
    for s in batches(task).next_epoch_itr(shuffle=False):
        orig, chosen = original(s), s["target"].ne(d.pad())
        valid = orig.ne(d.pad())
        is_begin = begins[orig] & valid
        is_begin[:, 0] = True
        cont = ~is_begin & valid
        # a continuation piece goes with the piece before it
        assert torch.equal(chosen[:, 1:][cont[:, 1:]], chosen[:, :-1][cont[:, 1:]])
        pieces_masked += int((chosen & cont).sum())
        words, k = is_begin.sum(1).numpy(), (chosen & is_begin).sum(1).numpy()
        assert ((k == np.floor(0.3 * words)) | (k == np.floor(0.3 * words) + 1)).all()
    assert pieces_masked > 0


def test_span_masking_is_masked_lm_only(data_bin):
    with pytest.raises(ValueError, match="--mask-multiple-length.*--task masked_lm"):
        make_task(data_bin, mask_multiple_length=3)
