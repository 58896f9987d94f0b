"""Resuming ``fairseq-train`` (``recorded_runs`` and ``checked_resume``).

fairseq's ``Trainer.load_checkpoint`` (a resume from ``checkpoint_last.pt``, or
``--restore-file``) fails with a traceback whose last line hides what to do: a truncated file
ends in torch's zip-reader error, a checkpoint of other sizes (``--encoder-layers`` ...) in
"Cannot load model parameters ...; please ensure that the architectures match", one of another
criterion or optimizer in an ``AssertionError``. ``checked_resume`` says each in one line naming
the file, what differs and the fix (a ``CheckpointError``, which ends ``fairseq-train`` in
that one line: :mod:`.refusals`).

fairseq also records nothing of what a run was trained *with* beyond its config:
``recorded_runs`` adds to every checkpoint's ``extra_state`` (under :data:`RECORDS`) what the
run's criterion and task declare (``checkpoint_record()``: the synonym table's content
fingerprint of the plugin's criterions), the task's dictionary (:mod:`.dictionary_record`: a
resume on a dictionary of the same size in another order is refused) and, for fairseq's
``sentence_prediction``, the label
dictionary in the order the classification head's outputs are named by, the regression flag and
the GLUE task of the data directory (its ``meta.json``), so that predictions can be checked
against the data they are made on. On resume, the criterion and task that declare
``check_checkpoint_record(record, checkpoint, resumed)`` are asked to check the record.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import argparse
import json
import os
import re

from truneg_fairseq.checkpoint_schema.load_errors import CheckpointError, describe_load_error

from .dictionary_record import KEY as DICTIONARY
from .dictionary_record import dictionary_record, difference
from .refusals import is_refusal
from .wrapping import wrap_once

RECORDS = "truneg_records"
_MATCH = re.compile(r"(Criterion|Optimizer) does not match; .*\. (\S+) vs (\S+)\s*$", re.S)


def sentence_prediction_record(task):
    """The record of a fairseq ``sentence_prediction`` task (None for any other task): the labels
    the classification head's outputs 0..num_classes-1 stand for (None for a regression), the
    regression flag, and the GLUE task its data directory was prepared for (``meta.json``)."""
    from fairseq.tasks.sentence_prediction import SentencePredictionTask

    if not isinstance(task, SentencePredictionTask):
        return None
    cfg = task.cfg
    labels = None
    if not cfg.regression_target:
        d = task.label_dictionary
        labels = list(d.symbols[d.nspecial : d.nspecial + int(cfg.num_classes)])
    data_task = None
    meta = os.path.join(str(cfg.data).split(os.pathsep)[0], "meta.json")
    try:
        with open(meta, encoding="utf-8") as f:
            data_task = json.load(f).get("task")
    except (OSError, ValueError, AttributeError):
        pass  # a data directory not prepared by prepare_glue.py: no task name to record
    return {
        "labels": labels,
        "regression": bool(cfg.regression_target),
        "num_classes": int(cfg.num_classes),
        "data_task": data_task,
        "data": str(cfg.data),
    }


def _records(trainer) -> dict:
    out = {}
    for name, obj in (("criterion", trainer.get_criterion()), ("task", trainer.task)):
        make = getattr(obj, "checkpoint_record", None)
        if callable(make):
            out[name] = make()
    labels = sentence_prediction_record(trainer.task)
    if labels is not None:
        out["sentence_prediction"] = labels
    dictionary = dictionary_record(trainer.task)
    if dictionary is not None:
        out[DICTIONARY] = dictionary
    return out


def recorded_runs() -> None:
    """Add the run's records to every checkpoint fairseq-train saves (see the module docstring)."""
    from fairseq.trainer import Trainer

    def with_records(original):
        def state_dict(self):
            state = original(self)
            records = _records(self)
            if records:
                state["extra_state"][RECORDS] = records
            return state

        return state_dict

    wrap_once(Trainer, "state_dict", with_records, marker="truneg_records")


def _fields(model) -> dict:
    """The fields of a model config: a dict, an omegaconf config or (fairseq's RoBERTa and the
    models registered without a dataclass) an argparse namespace."""
    if isinstance(model, argparse.Namespace):
        return vars(model)
    try:
        return dict(model)
    except Exception:
        return {}


def _saved_model_config(path) -> dict:
    import torch

    try:
        raw = torch.load(str(path), map_location="cpu", weights_only=True)
        return _fields(raw["cfg"]["model"])
    except Exception:
        return {}


def _model_keys(arch) -> set:
    """The model fields of architecture ``arch`` (its dataclass, or the flags of its add_args):
    a legacy model's config is the whole command line, of which only these describe the model."""
    from fairseq.models import (
        ARCH_MODEL_NAME_REGISTRY,
        ARCH_MODEL_REGISTRY,
        MODEL_DATACLASS_REGISTRY,
    )

    cls = ARCH_MODEL_REGISTRY.get(arch)
    if cls is None:
        return set()
    dc = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY[arch])
    if dc is not None:
        return set(dc.__dataclass_fields__)
    parser = argparse.ArgumentParser(add_help=False)
    cls.add_args(parser)
    return {a.dest for a in parser._actions}


def _size_differences(path, model_cfg) -> str:
    """``--flag saved (here now)`` for the model fields whose values differ between the
    checkpoint ``path`` and this run's model config."""
    saved, here = _saved_model_config(path), _fields(model_cfg)
    keys = _model_keys(here.get("_name") or here.get("arch"))
    diffs = []
    for key, before in saved.items():
        if key not in keys or not isinstance(before, (int, float, str, bool)):
            continue
        now = here.get(key)
        if now is not None and type(now) is type(before) and now != before:
            diffs.append(f"--{key.replace('_', '-')} {before} there, {now} here")
    return "; ".join(diffs[:6])


def resume_message(path, exc: BaseException, trainer):
    """One line for an exception of ``Trainer.load_checkpoint(path)``, or None (re-raise it)."""
    if is_refusal(exc):  # the plugin's own error, said already
        return str(exc)
    start = "fairseq-train cannot continue from it"
    new_run = "or give another --save-dir (or --restore-file) to start a new run"
    match = _MATCH.search(str(exc)) if isinstance(exc, AssertionError) else None
    if match:
        what, before, now = match.groups()
        return (
            f"{path} was saved by a run with the {what.lower()} {before}; this run's is {now}: "
            f"resume with the same --{what.lower()}, or add --reset-optimizer to go on from its "
            f"weights with a new optimizer, {new_run}"
        )
    cause = exc.__context__ if str(exc).startswith("Cannot load model parameters") else exc
    if cause is not None and is_refusal(cause):  # a refusal of the plugin's model, said there
        return str(cause)
    said = describe_load_error(path, cause) if cause is not None else None
    if said is None:
        return None
    if "another dictionary" in said:
        where = str(trainer.cfg.task.data).split(os.pathsep)[0]
        counts = re.search(r"has (\d+) entries, .* gives (\d+)", said)
        sizes = f" ({counts.group(1)} entries there, {counts.group(2)} here)" if counts else ""
        return (
            f"{path} was trained with another dictionary than {where}/dict.txt{sizes}. {start}: "
            f"give the data directory it was trained on, {new_run}"
        )
    if "does not fit" in said:
        diffs = _size_differences(path, trainer.cfg.model)
        return (
            f"{said.rstrip('.')}{f' ({diffs})' if diffs else ''}. {start}: give the model flags "
            f"of the run that saved it, {new_run}"
        )
    return (
        f"{said.rstrip('.')}. {start}: move it away (fairseq-train then resumes from nothing) or "
        "give --restore-file an earlier checkpoint_N_M.pt"
    )


def _check_resumed_dictionary(task, record, filename) -> None:
    """The dictionary of the run resumed from ``filename`` against the one it records."""
    d = getattr(task, "source_dictionary", None)
    if not isinstance(record, dict) or d is None or not isinstance(record.get("symbols"), list):
        return
    where = os.path.join(str(task.cfg.data).split(os.pathsep)[0], "dict.txt")
    n = min(len(record["symbols"]), len(d.symbols))  # a task may add symbols of its own
    said = difference(record["symbols"][:n], d.symbols[:n], d.nspecial, where)
    if said is not None:
        raise CheckpointError(
            f"{filename} was trained with another dictionary than {where} (the one it records): "
            f"{said}. fairseq-train cannot continue from it: give the data directory it was "
            "trained on, or give another --save-dir (or --restore-file) to start a new run"
        )


def checked_resume() -> None:
    """Load errors of ``Trainer.load_checkpoint`` as one line, and the run's records checked on
    resume (see the module docstring)."""
    from fairseq.trainer import Trainer

    def checked_on_resume(original):
        def load_checkpoint(
            self,
            filename,
            reset_optimizer=False,
            reset_lr_scheduler=False,
            optimizer_overrides=None,
            reset_meters=False,
        ):
            try:
                extra = original(
                    self,
                    filename,
                    reset_optimizer,
                    reset_lr_scheduler,
                    optimizer_overrides,
                    reset_meters=reset_meters,
                )
                if extra is not None:
                    records = extra.get(RECORDS) or {}
                    _check_resumed_dictionary(self.task, records.get(DICTIONARY), filename)
                    for name, obj in (("criterion", self.get_criterion()), ("task", self.task)):
                        check = getattr(obj, "check_checkpoint_record", None)
                        if callable(check):
                            check(records.get(name), str(filename), not reset_optimizer)
            except Exception as e:
                msg = resume_message(filename, e, self)
                if msg is None:
                    raise
                if is_refusal(e):
                    raise
                raise CheckpointError(msg) from None
            return extra

        return load_checkpoint

    wrap_once(Trainer, "load_checkpoint", checked_on_resume, marker="truneg_checked")
