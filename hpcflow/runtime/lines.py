"""What rank 0 tells the job log: ``<tag> <json>`` lines (tags in :mod:`hpcflow.protocol`) that
``hpcflow report``, ``rehearse`` and the tests read while the job runs, and human-readable lines
tagged with the rank on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from hpcflow.runtime.env import DistEnv


def emit(env: DistEnv, tag: str, payload: dict[str, Any]) -> None:
    """Print ``<tag> <json>`` on rank 0's stdout and flush (the log is read while it runs)."""
    if env.is_rank0:
        print(f"{tag} {json.dumps(payload, sort_keys=True)}", flush=True)


def log(env: DistEnv, message: str) -> None:
    """A human-readable line on stderr, tagged with the rank."""
    prefix = f"hpcflow-runtime rank {env.rank}/{env.world_size}"
    print(f"{prefix}: {message}", file=sys.stderr, flush=True)
