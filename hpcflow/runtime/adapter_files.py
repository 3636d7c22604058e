"""A framework's own checkpoints (the Hugging Face Trainer's ``checkpoint-<N>/``, Lightning's
``step_<N>.ckpt``) when every host may keep its own checkpoint folder.

In a SageMaker training job of several instances each container has its own local checkpoint
folder, and SageMaker syncs every one of them with the one ``CheckpointConfig.S3Uri``; a
restarted job finds the union copied into each container's folder before the program starts
(developer guide, "Checkpoints in Amazon SageMaker AI",
https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html). The framework writes
where it writes (under DDP rank 0 the model and the optimizer, every rank the files of its own,
such as the Trainer's ``rng_state_<rank>.pth``), so no host holds the whole checkpoint while it
is written. hpcflow's own checkpoints solve the same in :mod:`hpcflow.runtime.host_local`;
the adapters do it this way:

- the keepers (:func:`is_keeper`): rank 0 looks after one shared folder; with a folder per host,
  the first rank of every host looks after its host's;
- the record: after every rank has written, each keeper lists its host's files with their
  sizes (:func:`listing`) and rank 0 writes the commit marker naming them all
  (:func:`merge_listings`). A checkpoint counts only where the marker is there and every listed
  file is present with its size (:func:`problem`): a file that never reached S3, or reached it
  half-written, leaves the checkpoint partial on every host alike;
- the agreement at start (:func:`agree`): each keeper removes the partial checkpoints it sees
  and reports the complete ones; the newest complete on every host is loaded;
- the pruning: rank 0 names the oldest checkpoint kept and every keeper removes the older ones,
  so SageMaker's sync removes them from S3 too (a local delete is synced).

No torch at import.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: The largest commit marker read (it lists a few files per rank).
_MAX_MARKER_BYTES = 4 * 1024 * 1024


def is_keeper(rank: int, local_rank: int, host_local: bool) -> bool:
    """Whether this rank looks after a checkpoint folder: the first rank of its host when every
    host has its own folder, else rank 0 alone. Pure."""
    return local_rank == 0 if host_local else rank == 0


def steps_in(root: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """``(step, path)`` of the names under ``root`` that ``pattern`` matches in full (its first
    group the step), ascending; empty when ``root`` is not a folder."""
    if not root.is_dir():
        return []
    found = [(int(m[1]), p) for p in root.iterdir() if (m := pattern.fullmatch(p.name))]
    return sorted(found)


def listing(folder: Path, skip: str = "") -> dict[str, int]:
    """Every regular file under ``folder`` (its path relative to ``folder``, ``/``-separated)
    with its size in bytes, but ``skip``; empty when the folder is absent."""
    if not folder.is_dir():
        return {}
    files = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if name != skip and path.is_file() and not path.is_symlink():
            files[name] = path.stat().st_size
    return files


def merge_listings(listings: Iterable[dict[str, int] | None]) -> dict[str, int]:
    """The keepers' listings as one (rank order; a path two hosts both wrote keeps the size of
    the first). Pure."""
    merged: dict[str, int] = {}
    for files in listings:
        for name, size in (files or {}).items():
            merged.setdefault(name, size)
    return dict(sorted(merged.items()))


def problem(folder: Path, marker: str) -> str | None:
    """Why ``folder`` is not a complete checkpoint here, or None when it is: the marker is
    missing or garbled, or a file it lists is missing or of another size. A marker without a
    file list (written before hpcflow listed files) is taken as complete."""
    path = folder / marker
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_MARKER_BYTES + 1)
    except FileNotFoundError:
        return f"no {marker}"
    except OSError as exc:
        return f"{marker} cannot be read ({exc.strerror or exc})"
    try:
        record = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return f"{marker} is not JSON"
    if not isinstance(record, dict):
        return f"{marker} is not a JSON object"
    files = record.get("files")
    if files is None:
        return None
    if not isinstance(files, dict):
        return f"{marker}: files is not a mapping"
    for name, size in files.items():
        target = folder / name
        if not target.is_file():
            return f"{name} is missing"
        if target.stat().st_size != size:
            return f"{name} has {target.stat().st_size} bytes, the record says {size}"
    return None


def agree(reports: Sequence[list[int] | None]) -> int | None:
    """The step to resume from: the newest step every keeper reported complete (``None``
    reports come from ranks that keep no folder), or None. Pure."""
    seen = [set(steps) for steps in reports if steps is not None]
    common = set.intersection(*seen) if seen else set()
    return max(common) if common else None


def oldest_kept(committed: Iterable[int], keep: int) -> int | None:
    """The oldest of the newest ``keep`` committed steps (None when there is none). Pure."""
    steps = sorted(set(committed))[-keep:]
    return steps[0] if steps else None


def remove(path: Path, marker: str = "") -> None:
    """Remove a checkpoint file or folder (a folder's marker first, so a removal cut short is
    never taken for a checkpoint).

    Raises:
        OSError: the file system refused.
    """
    if path.is_dir() and not path.is_symlink():
        if marker:
            (path / marker).unlink(missing_ok=True)
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def all_gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` in rank order (collective over the default process group; pickles,
    so keep it small); ``[obj]`` without a process group."""
    from hpcflow.runtime import dist as hdist

    if not hdist.is_distributed():
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
