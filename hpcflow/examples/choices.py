"""The example program's command-line choices, in a module that imports neither torch nor numpy:
``python -m hpcflow.examples.train --help``, or a bad argument, answers before the heavy imports.
The modules that use them (:mod:`hpcflow.examples.tasks`, :mod:`~hpcflow.examples.lm`,
:mod:`~hpcflow.examples.parallelize`, :mod:`~hpcflow.examples.data`) take them from here."""

from __future__ import annotations

#: ``--model``: the two workloads (:mod:`hpcflow.examples.tasks`).
MODELS = ("toy-mlp", "lm")
#: ``--model-size``: the names of :data:`hpcflow.examples.lm.PRESETS`.
MODEL_SIZES = ("tiny", "small", "base", "1b")
#: ``--schedule`` value -> (``torch.distributed.pipelining`` class name, stages per pp rank).
SCHEDULES: dict[str, tuple[str, int]] = {
    "gpipe": ("ScheduleGPipe", 1),
    "1f1b": ("Schedule1F1B", 1),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2),
}
#: ``--dp-mode``: FSDP2 sharding or DDP.
DP_MODES = ("fsdp", "ddp")
#: ``--data`` for the Python standard library's own ``.py`` files.
STDLIB = "stdlib"
#: Default cap on the bytes read from text sources: enough for many epochs of a small run, small
#: enough that every rank reads it in well under a second.
DEFAULT_MAX_BYTES = 8 * 2**20
