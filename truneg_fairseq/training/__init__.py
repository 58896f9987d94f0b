"""The plugin's training engine inside ``fairseq-train``: an update that never waits for the
device, optionally compiled as one graph, with its statistics summed on the device. It replaces
two of fairseq's ``Trainer`` methods and wraps one, each in one place, installed by :func:`install`
(the package root calls it after the mends of :mod:`truneg_fairseq.compat`):

============================  =====================  ===========================================
``Trainer`` method            module                 what runs instead
============================  =====================  ===========================================
``train_step``                :mod:`.fast_update`    :class:`~.fast_update.FastUpdate` where it
                                                     applies (else fairseq's)
``_reduce_and_log_stats``     :mod:`.device_stats`   sums on the device, reduced once per
                                                     ``--log-interval`` into the same meters
``save_checkpoint``           :mod:`.device_stats`   the sums reduced first, then fairseq's save
============================  =====================  ===========================================

The rest of the engine: :mod:`.compiled_update` (the whole update as one compiled graph),
:mod:`.bf16_weights` (bf16 copies of the weights under autocast), :mod:`.worker_grads` (the
gradients summed by the update itself with several workers), :mod:`.sync_debug` (the check that
an update asks the device for nothing), :mod:`.dynamo_fallback` (a compiled stack that falls back
to eager says so). Nothing here changes what an update computes: the tests compare its weights,
moments and logs with fairseq's own update.
"""

_installed = False


def install() -> None:
    """Install the engine on fairseq's ``Trainer``, once per process (idempotent)."""
    global _installed
    if _installed:
        return
    from .device_stats import device_statistics
    from .fast_update import fast_updates

    device_statistics()
    fast_updates()
    _installed = True
