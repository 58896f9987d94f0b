"""Checkpoint configs are data, not code (``safe_checkpoint_configs``): fairseq passes some
config fields to Python's ``eval`` when it builds a model or an optimizer (e.g.
``encoder_xformers_att_config`` in every transformer layer, ``adam_betas``, adaptive-softmax
cutoffs), at any depth (a RoBERTa checkpoint keeps ``cfg.model`` as an argument namespace, and
fairseq's ``TransformerConfig`` reads a dict under ``cfg.model.encoder`` as a nested group). A
checkpoint of plain data passes the weights-only load and would then run whatever such a field
holds. So every config fairseq reads from a checkpoint file
(``checkpoint_utils.load_checkpoint_to_cpu``: fairseq-train's resume and ``--restore-file``,
``load_model_ensemble_and_task`` and fairseq-validate, the hub, every script of the plugin) is
not filtered but rebuilt (:func:`rebuild_checkpoint_configs`, :mod:`.config_schema`): a new
config made from fairseq's schema, each known field checked for its type and copied, a field
fairseq evaluates (:data:`EVALUATED_FIELDS`; a test derives the set from fairseq's source) holding
plain data wherever it sits (a literal, or lists joined by ``+`` and repeated by ``*`` an integer,
as fairseq's fconv and wav2vec defaults are written). What fairseq's constructors receive is that
rebuilt config; an unknown field, a value of the wrong type or code refuses the file with one
error naming the field's dotted path. The plugin's own loaders (``checkpoints.load_for_inference``:
its scripts, evaluation and HuggingFace export) go further and are an allow-list: a checkpoint
must be of the families the plugin trains and converts (fairseq's ``RobertaModel`` and the
plugin's models, read from fairseq's registries) and any other architecture (``cfg.model._name``,
or ``args.arch`` of an old-style checkpoint) is refused before anything is built. fairseq's own
commands under the plugin (``fairseq-train`` resume, ``--restore-file``, fairseq-validate) keep
loading other models, a user's own runs, through the rebuild alone.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import contextvars

from .config_schema import UnsafeCheckpointError, rebuild_args, rebuild_config

# config fields (any group, any prefix such as encoder_/decoder_) whose string value fairseq 0.12
# evaluates with eval(), utils.eval_str_dict / eval_str_list / eval_bool anywhere in its source
# (models of every family, optimizers, tasks, criterions, examples). tests/test_untrusted_files.py
# derives the set from the installed fairseq and fails when a call site reads a field missing here:
# a deny-list kept by hand missed fconv's decoder_layers and wav2vec's conv_feature_layers.
EVALUATED_FIELDS = (
    "xformers_att_config",
    "adaptive_softmax_cutoff",
    "adaptive_input_cutoff",
    "kernel_size_list",
    "left_pad_source",
    "left_pad_target",
    "pipeline_balance",
    "pipeline_devices",
    "decoder_attention",
    "adam_betas",
    "adamax_betas",
    "lamb_betas",
    "adafactor_eps",
    "wer_args",
    # fconv, fconv_lm, fconv_self_att
    "encoder_layers",
    "decoder_layers",
    "encoder_attention",
    "self_attention",
    "project_input",
    "gated_attention",
    "downsample",
    "pretrained",
    # transformer_lm, lightconv_lm; wav2vec, wav2vec2, hubert, speech_to_text, data2vec
    "character_filters",
    "conv_feature_layers",
    "conv_aggregator_layers",
    "feature_encoder_spec",
    # pipeline-parallel transformer; examples (laser, speech_recognition, scripts)
    "pipeline_encoder_balance",
    "pipeline_encoder_devices",
    "pipeline_decoder_balance",
    "pipeline_decoder_devices",
    "decoder_zero_init",
    "conv_enc_config",
    "conv_dec_config",
    "vggblock_enc_config",
    "transformer_enc_config",
    "transformer_dec_config",
    "transformer_context",
    "transformer_sampling",
    "model_overrides",
)


class UnknownArchitectureError(UnsafeCheckpointError):
    """A checkpoint of a model family the plugin does not load."""


def _evaluated(key: str) -> bool:
    return key.endswith(
        EVALUATED_FIELDS
    )  # the field itself or a prefixed one (encoder_..., decoder_...)


_MAX_ITEMS = 100_000  # a value fairseq evaluates is a short layer list, never this long


def _data_value(node):
    """The value of expression ``node`` when it is plain data: a literal (``ast.literal_eval``'s
    grammar) or lists/tuples/strings/numbers joined by ``+`` and repeated by ``*`` an integer,
    the form fairseq's own defaults take (``"[(512, 3)] * 20"`` in fconv,
    ``"[(512, 10, 5)] + [(512, 3, 2)] * 4"`` in wav2vec2). Anything else (a name, a call, an
    attribute, a comprehension) raises ValueError: it is code. Sizes are bounded, so a
    repetition cannot exhaust memory here."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _data_value(node.left), _data_value(node.right)
        if isinstance(node.op, ast.Mult):
            count = right if isinstance(right, int) and not isinstance(right, bool) else left
            other = left if count is right else right
            if (
                isinstance(other, (list, tuple, str))
                and isinstance(count, int)
                and not isinstance(count, bool)
            ):
                if len(other) * max(count, 0) > _MAX_ITEMS:
                    raise ValueError("too long")
            elif not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
                raise ValueError("not data")
        elif not (
            type(left) is type(right)
            and isinstance(left, (list, tuple, str))
            or isinstance(left, (int, float, complex))
            and isinstance(right, (int, float, complex))
        ):
            raise ValueError("not data")
        value = left * right if isinstance(node.op, ast.Mult) else left + right
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e18:
            raise ValueError("too large")
        return value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_data_value(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    return ast.literal_eval(node)


def safe_literal(value, where: str):
    """``value`` itself when it is not a string; a string fairseq would ``eval``: the same text
    without surrounding blanks (evaluating it builds the plain value :func:`_data_value` reads,
    and a field fairseq also splits, ``encoder_layers_to_keep``, keeps its form), or
    :class:`UnsafeCheckpointError` when it is anything but plain data."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if text:
            _data_value(ast.parse(text, mode="eval").body)
        return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        raise UnsafeCheckpointError(
            f"{where} is {value[:80]!r}: fairseq evaluates this field as Python, and it is not a plain "
            "value (numbers, strings, lists, dicts) but code. The checkpoint was not loaded; if you made "
            "it yourself, set the field to null (or a literal) and save it again"
        ) from None


def rebuild_checkpoint_configs(state: dict, path: str, overrides=None) -> None:
    """Replace (in ``state``, a checkpoint's saved state read from ``path``) the ``args`` of an
    old-style checkpoint and the ``cfg`` with configs rebuilt from fairseq's schema
    (:mod:`.config_schema`): every field known, of its type, plain data where fairseq evaluates
    it, at every depth; else :class:`UnsafeCheckpointError` naming the field. ``overrides``: the
    loader's ``arg_overrides``, kept."""
    if state.get("args") is not None:
        state["args"] = rebuild_args(state["args"], path, overrides)
    if state.get("cfg") is not None:
        state["cfg"] = rebuild_config(state["cfg"], path, overrides)


def loadable_architectures() -> dict:
    """{name: model name} of every architecture and model name the plugin's inference loader
    builds: the families the plugin trains and converts, read from fairseq's registries by model
    class (fairseq's own ``RobertaModel``, and every model class the plugin defines), so an
    architecture added to one of those models is loadable without a list kept by hand, and
    fairseq's other models (fconv, wav2vec, speech, translation, ...) are not."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.models.roberta import RobertaModel

    def ours(cls) -> bool:
        return cls is RobertaModel or cls.__module__.split(".")[0] == __name__.split(".")[0]

    out = {name: name for name, cls in MODEL_REGISTRY.items() if ours(cls)}
    out.update(
        {
            arch: ARCH_MODEL_NAME_REGISTRY[arch]
            for arch, cls in ARCH_MODEL_REGISTRY.items()
            if ours(cls)
        }
    )
    return out


def checkpoint_architecture(state: dict):
    """The architecture fairseq would build from checkpoint ``state`` (as ``models.build_model``
    picks it: the model config's ``_name``, else its ``arch``; an old-style checkpoint's
    ``args.arch``), or None when it names none."""
    cfg = state.get("cfg")
    model = None
    if cfg is not None:
        try:
            model = cfg["model"] if not isinstance(cfg, argparse.Namespace) else None
        except Exception:
            model = None
    for source in (model, state.get("args")):
        if source is None:
            continue
        for key in ("_name", "arch"):
            try:
                name = (
                    source[key]
                    if not isinstance(source, argparse.Namespace)
                    else getattr(source, key, None)
                )
            except Exception:
                name = getattr(source, key, None)
            if name:
                return str(name)
    return None


def check_architecture(state: dict, path: str) -> None:
    """Refuse checkpoint ``path`` unless it is of a family in :func:`loadable_architectures`,
    before anything reads its config further or builds it: the field check of
    :func:`sanitise_config` stands on knowing every field a model evaluates, and the plugin's
    loaders then need know only the models they use (see the module docstring)."""
    arch = checkpoint_architecture(state)
    allowed = loadable_architectures()
    if arch in allowed:
        return
    families = ", ".join(sorted(set(allowed.values())))
    said = f"architecture {arch!r}" if arch else "no architecture"
    raise UnknownArchitectureError(
        f"{path} is a checkpoint of {said}, which the plugin does not load: it loads the model families it "
        f"trains and converts ({families}, with their architectures such as roberta_base, electra_small, "
        "bert_hf_base). Nothing was built; load this file with the tools of the project that made it"
    )


_FAMILIES_ONLY = contextvars.ContextVar("truneg_families_only", default=False)


@contextlib.contextmanager
def plugin_families_only():
    """Within the block, every checkpoint fairseq reads must pass :func:`check_architecture`
    (the plugin's inference loader and converters run inside one)."""
    token = _FAMILIES_ONLY.set(True)
    try:
        yield
    finally:
        _FAMILIES_ONLY.reset(token)


def _explain_failed_upgrade(path: str) -> None:
    """fairseq failed while reading or upgrading ``path`` (an old-style ``args`` checkpoint is
    converted to a config before any check can see it, and that conversion fails for some other
    architectures): when the stored file itself is of another family (where only the plugin's are
    loaded) or its config does not rebuild (code, an unknown field), raise that error instead of
    fairseq's."""
    import torch

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return  # not readable as plain data either: fairseq's own error stands
    if not isinstance(raw, dict) or (raw.get("cfg") is None and raw.get("args") is None):
        return  # no config to judge: fairseq's own error stands
    if _FAMILIES_ONLY.get():
        check_architecture(raw, path)
    rebuild_checkpoint_configs(raw, path)
    check_plugin_model_values(raw, path)


def check_plugin_model_values(state: dict, path: str) -> None:
    """A checkpoint of the plugin's families: its model config's values against the schema of
    :mod:`.model_values` and the weights saved with it (other families' fields mean other things:
    fconv's ``encoder_layers`` is a string fairseq evaluates, checked above)."""
    from .model_values import check_model_values

    if checkpoint_architecture(state) not in loadable_architectures():
        return
    cfg = state.get("cfg")
    model = None
    if cfg is not None and not isinstance(cfg, argparse.Namespace):
        try:
            model = cfg["model"]
        except Exception:
            model = None
    for source in (model, state.get("args")):
        if source is not None:
            check_model_values(source, path, state.get("model"))


def safe_checkpoint_configs() -> None:
    """Rebuild the config of every checkpoint fairseq loads (see the module docstring): the
    architecture is checked first where :func:`plugin_families_only` asks for it, then ``args``
    and ``cfg`` are replaced by configs rebuilt from fairseq's schema.

    The architecture allow-list is not applied to fairseq's own commands run with the plugin
    loaded (``fairseq-train`` resume and ``--restore-file``, ``fairseq-validate``): a user's own
    run of another fairseq model keeps resuming as it did, and what such a file could run is
    closed by the rebuild, which knows every field and every field fairseq evaluates."""
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "truneg_safe", False):  # installed already
        return

    def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
        try:
            state = original(path, arg_overrides=arg_overrides, load_on_all_ranks=load_on_all_ranks)
        except Exception:
            _explain_failed_upgrade(str(path))
            raise
        if _FAMILIES_ONLY.get():
            check_architecture(state, str(path))
        rebuild_checkpoint_configs(state, str(path), arg_overrides)
        check_plugin_model_values(state, str(path))
        return state

    load_checkpoint_to_cpu.truneg_safe = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
