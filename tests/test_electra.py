"""ELECTRA: model structure, the replaced-token-detection term, and the criterions on it."""

import dataclasses

import pytest
import torch
from fairseq_runs import TINY_ELECTRA, build_components, valid_batch
from repo_paths import REPO

from truneg_fairseq.core import losses, objectives

# every criterion on an ELECTRA model (mlm_plain there is electra's step)
ELECTRA_CRITERIA = [e.criterion for e in objectives.entries()]
PAD = 1


def electra(data_bin, criterion_args, **kw):
    return build_components(data_bin, criterion_args, arch_args=TINY_ELECTRA, task="electra", **kw)


def count(module):
    return sum(p.numel() for p in module.parameters())


def arch_cfg(arch):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        ["x", "--task", "electra", "--arch", arch, "--criterion", "electra"],
    )
    return convert_namespace_to_omegaconf(args)


def build_arch(arch, vocab_size):
    """Build a full-size arch with a vocabulary of ``vocab_size`` entries (incl. <mask>)."""
    from fairseq.data import Dictionary

    from truneg_fairseq.models.electra import ElectraModel
    from truneg_fairseq.tasks.electra import ElectraTask

    d = Dictionary()
    for i in range(vocab_size - len(d) - 1):
        d.add_symbol(f"w{i}")
    cfg = arch_cfg(arch)
    task = ElectraTask(cfg.task, d)
    assert len(task.source_dictionary) == vocab_size
    model = ElectraModel.build_model(cfg.model, task)
    model.add_generator()  # as --task electra does
    return model


def disc_params(m):
    return count(m.embeddings) + count(m.discriminator) + count(m.discriminator_head)


def test_parameter_counts_per_arch():
    small = build_arch("electra_small", 30522)
    # published ELECTRA-small discriminator: 13.5M (30522-entry WordPiece vocabulary)
    assert 13.4e6 < disc_params(small) < 13.6e6
    assert count(small.generator) + count(small.generator_head) < 0.1 * disc_params(small)
    base = build_arch("electra_base", 30522)
    assert 108e6 < disc_params(base) < 112e6  # BERT-base size
    assert base.cfg.electra_gen_hidden_dim * 3 == base.cfg.electra_hidden_dim  # generator 1/3 width
    large = arch_cfg("electra_large").model  # 335M parameters: sizes checked, not built
    assert (
        large.electra_hidden_dim,
        large.electra_layers,
        large.electra_heads,
        large.electra_ffn_dim,
    ) == (1024, 24, 16, 4096)
    assert large.electra_gen_hidden_dim * 4 == large.electra_hidden_dim  # generator 1/4 width


# ElectraSize field -> the model field it sets
SIZE_FIELDS = {
    "embed": "electra_embed_dim",
    "hidden": "electra_hidden_dim",
    "layers": "electra_layers",
    "heads": "electra_heads",
    "ffn": "electra_ffn_dim",
    "gen_hidden": "electra_gen_hidden_dim",
    "gen_heads": "electra_gen_heads",
    "gen_ffn": "electra_gen_ffn_dim",
    "max_positions": "electra_max_positions",
}


@pytest.mark.parametrize("arch", ["electra_tiny", "electra_small", "electra_base", "electra_large"])
def test_registered_archs_read_the_sizes_table(arch):
    from truneg_fairseq.models.electra import ELECTRA_SIZES

    model = arch_cfg(arch).model
    size = dataclasses.asdict(ELECTRA_SIZES[arch])
    assert {f: getattr(model, SIZE_FIELDS[f]) for f in size} == size
    assert model.electra_gen_layers == size["layers"]  # the generator has the discriminator's depth


def test_example_configs_agree_with_the_sizes_table():
    """The hydra configs name an arch and may spell sizes out: those must be the table's (a
    declared field left null takes the arch's or the import's value)."""
    import yaml

    from truneg_fairseq.models.electra import ELECTRA_SIZES

    configs = sorted((REPO / "examples" / "electra" / "config").glob("*.yaml"))
    assert configs
    for path in configs:
        model = yaml.safe_load(path.read_text(encoding="utf-8")).get("model") or {}
        size = ELECTRA_SIZES[model["_name"]]
        for f, value in dataclasses.asdict(size).items():
            if model.get(SIZE_FIELDS[f]) is not None:
                assert model[SIZE_FIELDS[f]] == value, f"{path.name}: {SIZE_FIELDS[f]}"
        if model.get("electra_gen_layers") is not None:
            assert model["electra_gen_layers"] == size.layers, f"{path.name}: electra_gen_layers"


def test_generator_output_tied_and_embeddings_shared(data_bin):
    task, model, _ = electra(data_bin, ["--criterion", "electra"])
    V, E = len(task.source_dictionary), model.cfg.electra_embed_dim
    vocab_matrices = [n for n, p in model.named_parameters() if p.shape == (V, E)]
    assert vocab_matrices == ["embeddings.embed_tokens.weight"]  # one matrix: input and output
    model.eval()
    tokens = valid_batch(task)["net_input"]["src_tokens"]
    masked = tokens.ne(PAD)
    logits = model.generator_logits(tokens, masked)
    with torch.no_grad():
        model.embed_tokens.weight[5] += 1.0  # the same tensor moves the generator's output
    assert not torch.allclose(model.generator_logits(tokens, masked)[:, 5], logits[:, 5])
    # generator and discriminator read the same embedding module
    grads = {}
    for name, fn in (
        ("gen", lambda: model.generator_features(tokens).sum()),
        ("disc", lambda: model.discriminator_features(tokens).sum()),
    ):
        model.zero_grad()
        fn().backward()
        grads[name] = model.embed_tokens.weight.grad.abs().sum()
    assert grads["gen"] > 0 and grads["disc"] > 0


def test_no_gradient_reaches_the_generator_through_the_sample(data_bin):
    task, model, crit = electra(data_bin, ["--criterion", "electra", "--electra-gen-weight", "0"])
    model.train()
    loss, _, log = crit(model, valid_batch(task))
    loss.backward()
    gen = [
        p.grad
        for n, p in model.named_parameters()
        if n.startswith(("generator.", "generator_head.", "generator_bias"))
    ]
    assert gen and all(g is None or g.abs().sum() == 0 for g in gen)
    assert model.discriminator_head.dense.weight.grad.abs().sum() > 0
    assert float(log["disc_loss"]) > 0


def test_rtd_targets_sample_equal_to_original_is_original():
    original = torch.tensor([[0, 5, 6, 7, 2, PAD]])
    corrupted = torch.tensor([[0, 5, 9, 8, 2, PAD]])  # pos 1 sampled == original, 2 and 3 replaced
    nonpad = original.ne(PAD)
    syn = torch.tensor([[False, True, True, False, False, False]])  # pos 2's sample is a synonym
    labels, weights, replaced = losses.rtd_targets(original, corrupted, nonpad, syn, "replaced")
    assert labels.tolist() == [[0, 0, 1, 1, 0, 0]]
    assert weights.tolist() == [[1, 1, 1, 1, 1, 0]]
    labels, weights, _ = losses.rtd_targets(original, corrupted, nonpad, syn, "original")
    assert labels.tolist() == [[0, 0, 0, 1, 0, 0]] and weights.tolist() == [[1, 1, 1, 1, 1, 0]]
    labels, weights, _ = losses.rtd_targets(original, corrupted, nonpad, syn, "ignore")
    assert labels.tolist() == [[0, 0, 1, 1, 0, 0]] and weights.tolist() == [[1, 1, 0, 1, 1, 0]]
    assert replaced.tolist() == [[False, False, True, True, False, False]]


@pytest.mark.parametrize("policy", ["replaced", "original", "ignore"])
def test_synonym_policy_in_the_criterion(data_bin, synonym_table, policy):
    """Force every sampled replacement to be '▁main' at gold '▁primary': each policy labels them
    as documented, and the firing count is logged."""
    task, model, crit = electra(
        data_bin,
        [
            "--criterion",
            "electra",
            "--synonym-table",
            str(synonym_table),
            "--electra-rtd-synonym-policy",
            policy,
        ],
    )
    model.eval()
    d = task.source_dictionary
    gold, syn = d.index("\u2581primary"), d.index("\u2581main")
    sample = valid_batch(task)
    masked = sample["target"].ne(d.pad())
    sample["target"][masked] = gold
    with torch.no_grad():
        model.generator_bias[syn] = 1e4  # the generator always samples '▁main'
    seen = {}
    orig = losses.rtd_targets

    def spy(original, corrupted, nonpad, synonym_sample, pol):
        out = orig(original, corrupted, nonpad, synonym_sample, pol)
        seen.update(syn=synonym_sample, labels=out[0], weights=out[1], replaced=out[2])
        return out

    losses.rtd_targets = spy
    try:
        _, _, log = crit(model, sample)
    finally:
        losses.rtd_targets = orig
    fired = seen["syn"] & seen["replaced"]
    assert int(fired.sum()) > 0 and int(log["rtd_synonym"]) == int(fired.sum())
    if policy == "replaced":
        assert bool((seen["labels"][fired] == 1).all()) and bool(
            (seen["weights"][fired] == 1).all()
        )
    elif policy == "original":
        assert bool((seen["labels"][fired] == 0).all()) and bool(
            (seen["weights"][fired] == 1).all()
        )
    else:
        assert bool((seen["weights"][fired] == 0).all())
    assert int(log["rtd_replaced"]) == int(seen["replaced"].sum())


@pytest.mark.parametrize("criterion", ELECTRA_CRITERIA)
def test_electra_sharding_and_all_parameters_used(data_bin, synonym_table, criterion):
    task, model, crit = electra(
        data_bin, ["--criterion", criterion, "--synonym-table", str(synonym_table)]
    )
    model.cfg.electra_sample_temperature = (
        1e-6  # deterministic sampling: shards see the same samples
    )
    model.eval()
    ds = (
        task.dataset("valid")
        if "valid" in task.datasets
        else (task.load_dataset("valid") or task.dataset("valid"))
    )
    whole = ds.collater([ds[i] for i in range(8)])
    a, b = ds.collater([ds[i] for i in range(4)]), ds.collater([ds[i] for i in range(4, 8)])
    loss, ss, log = crit(model, whole)
    la, sa, log_a = crit(model, a)
    lb, sb, log_b = crit(model, b)
    assert torch.allclose((la + lb) / (sa + sb), loss / ss, rtol=1e-4)
    for k in (
        "disc_loss",
        "disc_tokens",
        "disc_correct",
        "rtd_replaced",
        "rtd_true_pos",
        "rtd_pos",
    ):
        assert torch.allclose(
            torch.as_tensor(log_a[k] + log_b[k]).float(), torch.as_tensor(log[k]).float(), rtol=1e-4
        ), k
    model.train()
    model.zero_grad()
    crit(model, whole)[0].backward()
    unused = [
        n for n, p in model.named_parameters() if p.grad is None and "classification_heads" not in n
    ]
    assert unused == []


def test_bad_configurations(data_bin, synonym_table):
    with pytest.raises(ValueError, match="needs an ELECTRA model"):
        build_components(data_bin, ["--criterion", "electra"], task="electra")  # roberta arch
    task, model, crit = build_components(
        data_bin, ["--criterion", "electra"], arch_args=TINY_ELECTRA, task="masked_lm"
    )
    assert model.generator is None  # only the pre-training tasks add it
    with pytest.raises(ValueError, match="not --task masked_lm"):
        crit(model, valid_batch(task))
    with pytest.raises(ValueError, match="must not be larger than the discriminator"):
        electra(data_bin, ["--criterion", "electra", "--electra-gen-hidden-dim", "64"])
    with pytest.raises(
        ValueError, match="--electra-rtd-synonym-policy ignore needs --synonym-table"
    ):
        electra(data_bin, ["--criterion", "electra", "--electra-rtd-synonym-policy", "ignore"])
    with pytest.raises(ValueError, match="needs an ELECTRA model"):  # roberta + electra criterion
        build_components(data_bin, ["--criterion", "electra"])


def test_electra_masking_defaults_and_whole_words(data_bin, corpus_dir):
    task, _, _ = electra(
        data_bin,
        [
            "--criterion",
            "electra",
            "--mask-whole-words",
            "--electra-tokenizer",
            "sentencepiece",
            "--electra-spm-model",
            str(corpus_dir / "spm.model"),
        ],
    )
    assert (task.cfg.mask_prob, task.cfg.leave_unmasked_prob, task.cfg.random_token_prob) == (
        0.15,
        0.15,
        0.0,
    )
    d = task.source_dictionary
    sample = valid_batch(task, 64)
    src, tgt = sample["net_input"]["src_tokens"], sample["target"]
    masked = tgt.ne(d.pad())
    original = torch.where(masked, tgt, src)
    # no random replacement: a selected token is either <mask> or itself
    assert bool(((src[masked] == task.mask_idx) | (src[masked] == tgt[masked])).all())
    cont = torch.tensor(
        [
            i >= d.nspecial and not d[i].startswith("\u2581") and d[i] != "<mask>"
            for i in range(len(d))
        ]
    )
    is_cont = cont[original] & original.ne(d.pad())
    checked = 0
    for b, t in is_cont.nonzero().tolist():
        assert bool(masked[b, t]) == bool(masked[b, t - 1]), (b, t)  # pieces of a word go together
        checked += 1
    assert checked > 0 and int(masked.sum()) > 0


def test_whole_word_masking_needs_the_tokenizer(data_bin):
    with pytest.raises(ValueError, match="needs --electra-spm-model"):
        electra(
            data_bin,
            [
                "--criterion",
                "electra",
                "--mask-whole-words",
                "--electra-tokenizer",
                "sentencepiece",
            ],
        )


def test_sampling_follows_the_generator_softmax(data_bin):
    task, model, _ = electra(data_bin, ["--criterion", "electra"])
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0, 0.5]]).repeat(100000, 1)
    allowed = torch.ones(5, dtype=torch.bool)
    allowed[model.padding_idx] = False  # <pad> is never a replacement (the softmax over the rest)
    freq = torch.bincount(model.sample_replacements(logits), minlength=5).float() / logits.size(0)
    want = torch.zeros(5)
    want[allowed] = torch.softmax(logits[0][allowed], -1)
    assert torch.allclose(freq, want, atol=0.01)
    model.cfg.electra_sample_temperature = 2.0
    freq = torch.bincount(model.sample_replacements(logits), minlength=5).float() / logits.size(0)
    want[allowed] = torch.softmax(logits[0][allowed] / 2.0, -1)
    assert torch.allclose(freq, want, atol=0.01)


def test_replacements_are_never_padding(data_bin):
    """A generator that puts nearly all its mass on <pad> still samples another token: a sampled
    <pad> would be padding to the discriminator."""
    import torch

    _, model, _ = electra(data_bin, ["--criterion", "electra"])
    pad = model.padding_idx
    logits = torch.zeros(64, len(model.embed_tokens.weight))
    logits[:, pad] = 50.0
    sampled = model.sample_replacements(logits)
    assert not sampled.eq(pad).any() and sampled.numel() == 64
