"""Every mend of fairseq 0.12 (and of the torch and NumPy it runs on) in one place, one
module per mend, installed by :func:`install` when the plugin is imported.

Each module's docstring says what fairseq does, why that fails or misleads, and how the mend
changes it; each mend checks that it is not installed already and leaves a fairseq alone that no
longer needs it where it can tell. They are installed in this order:

1. ``checkpoint_globals``: torch >= 2.6 loads checkpoints weights-only by default and refuses
   fairseq's (``Unsupported global: argparse.Namespace``); the plain-data globals fairseq
   checkpoints hold are allow-listed, the protection stays on.
2. ``checkpoint_copies``: fairseq copies a saved checkpoint to ``checkpoint_last.pt`` and
   ``checkpoint_best.pt`` with a plain copy, so a job killed during it leaves a truncated file;
   local copies become atomic (a temporary file of the copy's own, fsync, rename); its save
   writes ``<file>.tmp``, one name for every run saving that file: each save writes its own.
3. ``worker_broadcast``: with several workers, ranks other than 0 receive the checkpoint through
   ``torch.load`` and die on its ``DictConfig`` under weights-only loading; objects rank 0 of the
   same job pickled are sent with torch's own object broadcast.
4. ``checkpoint_configs``: fairseq ``eval``\\ s some config fields, at any depth, when it builds
   a model or an optimizer; every checkpoint config fairseq reads is rebuilt from fairseq's schema
   (``config_schema``: known fields only, each of its type, plain data where fairseq evaluates),
   and the plugin's own loaders also allow only the model families the plugin trains and
   converts.
5. ``numpy_long``: ``numpy.compat.long`` (fairseq's eos-mode ``TokenBlockDataset``) under NumPy 2.
6. ``prefetch_threads``: fairseq's prefetching threads are stopped at interpreter exit, which one
   still filling its queue aborted (exit status 134).
7. ``amp_unscale``: fairseq 0.12's ``--amp`` unscales the gradients twice, so every update is
   1/scale of what it should be; they are unscaled once (only when a probe shows the short update).
8. ``bf16_autocast``: fairseq 0.12's ``--bf16`` is its TPU mode (or bf16 weights); with the
   plugin it means fp32 weights and optimizer and a bf16-autocast forward pass and loss.
9. ``remainder_batch``: fairseq 0.12's batching drops the last batch of every split when its size
    is not a multiple of ``--required-batch-size-multiple``; it is kept as a final, smaller batch.
10. ``resume`` (two mends): a resume of ``fairseq-train`` that cannot continue (a truncated
    checkpoint, one of other sizes, of another criterion or optimizer) ends in a traceback; it is
    one line naming the file and the fix. Every checkpoint records what the run was trained with
    (the synonym table's fingerprint, a ``sentence_prediction`` run's labels and GLUE task), and a
    resume is checked against it.
11. ``hub_archives``: fairseq's hub extracts a ``.tar.gz`` with no filter (a member ``../x``
    is written outside the target), with no bound on what it expands to, and replaces the
    user's archive with the directory; members, their count and declared sizes are checked
    first, they are extracted with tarfile's ``data`` filter, a failed extraction removes what
    it wrote, and the archive is kept.
12. ``data_index``: fairseq trusts a data-bin's ``.idx`` (a 2**31-token sentence runs for a
    minute and takes gigabytes); its sizes are checked against the ``.bin``'s bytes first, and
    against the bytes it holds on disk (a sparse file's size is not data); a sample longer
    than the model's positions that the run may not leave out (validation, without
    ``--skip-invalid-size-inputs-valid-test``) is
    one error naming the split and the sample, not a traceback after the splits are built;
    a token id outside the dictionary a split is read with is one error naming the file and
    the sentence, not an ``IndexError`` in the model's embedding (``bounded_token_ids``).

13. ``refusals``: inside fairseq-train, fairseq-hydra-train and fairseq-validate, every error
    the plugin raises (bad input, refused flags, a checkpoint that cannot be resumed) ended in a
    traceback above its message; it is one line in fairseq's log format and exit status 1, and
    any other exception keeps its traceback.
16. ``save_dir_lock``: fairseq-train lets two runs share a ``--save-dir`` (the second loads the
    first's checkpoint while it is written); the process that writes checkpoints locks the
    directory for the run with the package's output lock (released at the end, a killed run's
    lock taken over), and a second run is one refusal naming the directory and the holder.
17. ``log_file``: fairseq's progress bar adds a ``--log-file`` handler on every epoch and
    validation, so epoch N's lines reach the file N times; the file gets one handler.
18. ``finished_run``: fairseq-train started again on a run that already holds
    ``--max-update`` updates trains one more and overwrites ``checkpoint_last.pt``; it says the
    run is finished and exits with status 0, having trained and written nothing.
19. ``first_speed``: fairseq's speed meters start at the first value logged and drop it, so
    the first ``train_inner`` line of every run says ``wps=0, ups=0``; a meter made at an update
    times that update and counts its value.

The plugin's training engine (the fast and compiled update, the statistics summed on the device)
is not a mend either: it is :mod:`truneg_fairseq.training`, installed after these.

What a checkpoint config may hold (fairseq's schema, the rebuild from it, the evaluated
fields, the plugin's model values, load errors in words) is not a mend: it is
:mod:`truneg_fairseq.checkpoint_schema`, beside the checkpoint reader; ``checkpoint_configs``
applies it to everything fairseq loads.

``wrapping`` is not a mend: its ``wrap_once`` puts every mend's wrapper (and those
of :mod:`truneg_fairseq.training`) in place, once, behind the marker the wrapper carries; and 7.
and 9. both wrap fairseq's ``convert_namespace_to_omegaconf`` and rebind it where fairseq bound
it by name.

One more mend lives outside this package: ``masked_lm``'s ``--mask-whole-words`` reads a
``self.args`` fairseq 0.12 no longer sets
(:func:`truneg_fairseq.text.whole_words.give_masked_lm_whole_words`). It answers with the data
directory's recorded tokenizer, so it needs ``text/``, a layer above this one
(docs/architecture.md; tests/test_imports.py checks imports inside functions too), and the
package root installs it after :func:`install`.

The names other modules and the tests use are importable from ``truneg_fairseq.compat`` itself.
"""

from __future__ import annotations

from truneg_fairseq.checkpoint_schema.config_rebuild import (  # noqa: F401
    rebuild_args,
    rebuild_config,
)
from truneg_fairseq.checkpoint_schema.config_schema import component_schema  # noqa: F401

from .amp_unscale import _amp_update_is_short, amp_unscales_once  # noqa: F401
from .bf16_autocast import PrecisionFlagError, bf16_means_autocast  # noqa: F401
from .checkpoint_configs import (  # noqa: F401
    EVALUATED_FIELDS,
    UnknownArchitectureError,
    UnsafeCheckpointError,
    _evaluated,
    check_architecture,
    checkpoint_architecture,
    loadable_architectures,
    plugin_families_only,
    rebuild_checkpoint_configs,
    safe_checkpoint_configs,
    safe_literal,
)
from .checkpoint_copies import (  # noqa: F401
    atomic_checkpoint_copies,
    atomic_checkpoint_saves,
    atomic_copy_file,
)
from .checkpoint_globals import (  # noqa: F401
    allow_fairseq_checkpoints,
    fairseq_checkpoint_globals,
)
from .data_index import (  # noqa: F401
    DataIndexError,
    SampleTooLongError,
    bounded_token_ids,
    checked_data_index,
    sized_samples,
)
from .finished_run import finished_run_does_nothing  # noqa: F401
from .first_speed import first_update_speed  # noqa: F401
from .hub_archives import ArchiveError, UnsafeArchiveError, safe_hub_archives  # noqa: F401
from .log_file import one_log_file_handler  # noqa: F401
from .numpy_long import numpy_compat_long  # noqa: F401
from .prefetch_threads import _stop_prefetch_threads, stop_prefetch_at_exit  # noqa: F401
from .refusals import is_refusal, one_line_refusals  # noqa: F401
from .remainder_batch import keep_remainder_batch  # noqa: F401
from .resume import RECORDS, checked_resume, recorded_runs  # noqa: F401
from .save_dir_lock import lock_save_dir, locked_save_dirs  # noqa: F401
from .worker_broadcast import trusted_worker_broadcast  # noqa: F401
from .wrapping import wrap_once  # noqa: F401

# the order of the list above
MENDS = (
    allow_fairseq_checkpoints,
    atomic_checkpoint_copies,
    atomic_checkpoint_saves,
    trusted_worker_broadcast,
    safe_checkpoint_configs,
    numpy_compat_long,
    stop_prefetch_at_exit,
    amp_unscales_once,
    bf16_means_autocast,
    keep_remainder_batch,
    recorded_runs,
    checked_resume,
    safe_hub_archives,
    checked_data_index,
    bounded_token_ids,
    sized_samples,
    one_line_refusals,
    locked_save_dirs,
    one_log_file_handler,
    finished_run_does_nothing,
    first_update_speed,
)

_installed = False


def install() -> None:
    """Install every mend of :data:`MENDS`, in order, once per process: a second call (the
    plugin imported again under another name, a test) changes nothing, so the at-exit prefetch
    stop is registered once and no wrapper wraps another of its kind."""
    global _installed
    if _installed:
        return
    for mend in MENDS:
        mend()
    _installed = True
