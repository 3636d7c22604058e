"""The commit protocol when every host has its own checkpoint folder (a SageMaker training job
of several instances).

SageMaker gives each instance's container its own local checkpoint folder and syncs every one
of them with the one ``CheckpointConfig.S3Uri``; a restarted job finds the S3 prefix copied
into each container's folder before the program starts (developer guide, "Checkpoints in
Amazon SageMaker AI", https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html).
DCP writes each rank's shards on the rank's own host, so no host sees the whole checkpoint
while it is written. The commit then goes:

1. Every rank has written (DCP's save returns on every rank after rank 0 wrote ``.metadata``).
2. The first rank of every host but rank 0's lists its host's files (path, size, the digests
   computed while they were written: :mod:`hpcflow.runtime.dcp_io`) and
   renames its ``step_<N>.tmp/`` to ``step_<N>/``, which holds no record and so counts as
   partial (:mod:`hpcflow.runtime.commit`). The lists are gathered on rank 0.
3. Rank 0 writes the commit record listing every host's files and renames its own folder:
   the commit point, as on a shared file system. A record is complete only where every listed
   file is present, which after a restart is every host (S3 holds the union).
4. Rank 0 prunes to ``keep`` committed checkpoints, and every other host removes the same older
   steps, so SageMaker's sync deletes them from S3 too (a local delete is synced).

A restart removes each host's partial folders, as rank 0 does on a shared file system.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.fsutil import fsync_dir
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime import dist as hdist


def gather(group: Any, obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order, over ``group`` (collective; pickles)."""
    if group is None:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def _raise_first(errors: list[str | None]) -> None:
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise CheckpointError(first)


def publish_host_files(root: Path, step: int, streamed: dict[str, dict[str, Any]] | None = None,
                       key: bytes | None = None) -> list[dict[str, Any]]:
    """Step 2 on a host's first rank: list ``step_<step>.tmp/`` and rename it to
    ``step_<step>/`` (a record-less folder of an earlier try at the same step is replaced).

    Args:
        root, step: the checkpoint folder and the step.
        streamed: every rank's digests computed while its files were written (gathered);
            a file missing from it is read and hashed here.
        key: the run's checkpoint key (None: CRC32C only).

    Returns:
        The files, as :func:`hpcflow.runtime.commit.streamed_files` gives them.

    Raises:
        OSError: the file system refused the listing, the removal or the rename.
    """
    tmp = ckpt_dirs.tmp_dir(root, step)
    if not tmp.is_dir():
        return []  # this host's ranks wrote nothing for this step
    files, _ = ckpt_dirs.streamed_files(tmp, streamed or {}, key)
    target = ckpt_dirs.step_dir(root, step)
    if target.is_dir() and not (target / ckpt_dirs.COMMIT_NAME).exists():
        shutil.rmtree(target)
    os.rename(tmp, target)
    fsync_dir(root)
    return files


def commit_union(root: Path, step: int, world_size: int, extra: dict[str, Any],
                 others: list[dict[str, Any]],
                 streamed: dict[str, dict[str, Any]] | None = None,
                 key: bytes | None = None) -> None:
    """Step 3 on rank 0: the record of every host's files, then the rename (the commit point).

    Raises:
        FileNotFoundError, FileExistsError, OSError: as :func:`hpcflow.runtime.commit.commit`.
    """
    ckpt_dirs.check_committable(root, step)
    ckpt_dirs.write_commit_record(ckpt_dirs.tmp_dir(root, step), step, world_size, extra,
                                  streamed=streamed or {}, key=key, more_files=others)
    ckpt_dirs.publish(root, step)


def recorded_steps(root: Path) -> list[int]:
    """Steps whose folder holds a commit record on this host, ascending (the files of other
    hosts are not looked for)."""
    steps = []
    for path in root.glob("step_*"):
        match = ckpt_dirs.STEP_DIR_RE.match(path.name)
        if match and (path / ckpt_dirs.COMMIT_NAME).is_file():
            steps.append(int(match.group(1)))
    return sorted(steps)


def prune_before(root: Path, oldest_kept: int) -> list[Path]:
    """Step 4 on every host's first rank: remove ``step_<N>/`` with ``N < oldest_kept`` (its
    record first, so a removal cut short is never taken for a checkpoint)."""
    removed = []
    for path in sorted(root.glob("step_*")):
        match = ckpt_dirs.STEP_DIR_RE.match(path.name)
        if not match or int(match.group(1)) >= oldest_kept or not path.is_dir():
            continue
        record = path / ckpt_dirs.COMMIT_NAME
        if record.exists():
            record.unlink()
        shutil.rmtree(path)
        removed.append(path)
    return removed


def commit_across_hosts(root: Path, step: int, keep: int, extra: dict[str, Any], *,
                        local_rank: int, group: Any,
                        streamed: dict[str, dict[str, Any]] | None = None,
                        key: bytes | None = None) -> None:
    """Steps 2-4 of the module docstring (collective over ``group``, every rank).

    Raises:
        CheckpointError: a host could not publish or rank 0 could not commit (on every rank).
    """
    leader = local_rank == 0
    rank0 = hdist.get_rank() == 0
    files: list[dict[str, Any]] = []
    error = None
    if leader and not rank0:
        try:
            files = publish_host_files(root, step, streamed or {}, key)
        except OSError as exc:
            error = f"publishing this host's files of step {step} under {root} failed: {exc}"
    gathered = gather(group, (files, error))
    _raise_first([e for _, e in gathered])
    oldest_kept = None
    if rank0:
        try:
            others = [f for fs, _ in gathered[1:] for f in fs]
            commit_union(root, step, hdist.get_world_size(), extra, others, streamed or {},
                         key)
            kept = recorded_steps(root)[-keep:]
            oldest_kept = kept[0] if kept else step
            prune_before(root, oldest_kept)
        except OSError as exc:
            error = f"commit checkpoint of step {step} under {root} failed: {exc}"
    gathered = gather(group, (oldest_kept, error))
    _raise_first([e for _, e in gathered])
    if leader and not rank0 and gathered[0][0] is not None:
        prune_before(root, gathered[0][0])


def clean_host(root: Path, *, local_rank: int, group: Any) -> list[Path]:
    """At start, every host's first rank removes its partial folders (collective).

    Raises:
        CheckpointError: a host could not remove one (on every rank).
    """
    removed: list[Path] = []
    error = None
    if local_rank == 0:
        try:
            removed = ckpt_dirs.remove_partial(root)
        except OSError as exc:
            error = f"clean partial checkpoints under {root} failed: {exc}"
    _raise_first([e for _, e in gather(group, (None, error))])
    return removed
