"""The restore's choice of checkpoint: the newest committed one whose record and bytes pass
their checks, the previous one loaded over it when it fails (docs/checkpoints.md, "Checksums").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.lines import log


def load_newest_sound(ckpt: Any, env: Any, app_state: Callable[[bool], dict[str, Any]],
                      before_load: Callable[[int], None] | None) -> int | None:
    """Load the newest committed checkpoint whose record and bytes pass their checks
    (collective); the step loaded, or None when there was none to load.

    Rank 0 picks the newest whose record passes (sizes, and the MAC when the run has a key:
    no file read) and broadcasts it; every rank loads it, checking each file's digests while
    reading (:meth:`~hpcflow.runtime.checkpoint.CheckpointManager.load`). One that fails is
    logged, passed over, and the previous one loaded over what it left in the state.

    Args:
        ckpt: the run's :class:`~hpcflow.runtime.checkpoint.CheckpointManager`.
        env: the run's :class:`~hpcflow.runtime.env.DistEnv` (rank 0 logs).
        app_state: ``app_state(same_world_size)``: the state dict to load into.
        before_load: called on every rank with the step about to be loaded.

    Raises:
        CheckpointError: a load failed for another reason, the key is unusable, or a checkpoint
            failed its check after some of its tensors were loaded and no older one is left
            (the state is no longer the program's own initial state); on every rank.
    """
    from hpcflow.runtime.commit import read_commit_record, step_dir
    from hpcflow.runtime.dcp_io import ChecksumMismatch

    def ignored(why: str) -> None:
        log(env, why)

    def pick(below: int | None) -> tuple[str, Any]:
        try:
            step = ckpt.latest_loadable(below, ignored, set_aside=True)
            if step is not None and ckpt.key() is None:
                record = read_commit_record(step_dir(ckpt.root, step)) or {}
                if any("blake3_keyed" in f for f in record.get("files", [])):
                    log(env, f"checkpoint {step_dir(ckpt.root, step)}: there is no key at "
                             f"{ckpt.key_file}, so its keyed digests are not checked, only its "
                             "CRC32C")
            return "step", step
        except CheckpointError as exc:  # raised on every rank below, not on rank 0 alone
            return "error", str(exc)

    below: int | None = None
    touched: str | None = None
    while True:
        kind, latest = hdist.broadcast_object(pick(below) if env.is_rank0 else None)
        if kind == "error":
            raise CheckpointError(latest)
        if latest is None:
            if touched is not None:
                raise CheckpointError(
                    f"{touched}, and no older committed checkpoint passes its checks; the state "
                    "was partly loaded from it, so the run does not start from scratch: move "
                    f"the checkpoints out of {ckpt.root} to start anew")
            return None
        directory = step_dir(ckpt.root, latest)
        record = read_commit_record(directory) or {}
        if before_load is not None:
            before_load(latest)
        try:
            ckpt.load(latest, app_state(record.get("world_size") == env.world_size))
            return latest
        except ChecksumMismatch as exc:
            if env.is_rank0:  # the other ranks are past their reads: rank 0 alone renames
                what = str(exc).splitlines()[0][:600]
                log(env, f"checkpoint {directory} is ignored: {what}; the previous committed "
                         f"checkpoint is used instead; {ckpt.set_aside(latest)}")
            touched = f"checkpoint {directory} failed its check"
            below = latest
