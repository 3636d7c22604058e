"""Where NCCL's loader must look for the aws-ofi-nccl plugin on this node: the batch script of a
job on an EFA instance runs ``python -m hpcflow.nccl.plugin_path`` and exports what it prints as
``LD_LIBRARY_PATH``.

NCCL opens its net plugin (``libnccl-net.so``, or ``libnccl-net-<NCCL_NET_PLUGIN>.so``) with
``dlopen``, so through the dynamic loader's search path: ``LD_LIBRARY_PATH``, then the
``ldconfig`` cache built from ``/etc/ld.so.conf.d`` (NCCL user guide, ``NCCL_NET_PLUGIN``;
ld.so(8), "Rpath token expansion" and the search order). The loader reads ``LD_LIBRARY_PATH``
once, when the program starts, so it must be set before the step starts, not by the runtime.

The directories, in this order, each only where it exists:

1. the one bootstrap step 20-nccl recorded (``<prefix>/var/lib/hpcflow/bootstrap/ofi-nccl.dir``:
   the plugin the EFA installer ships, or the one the step built);
2. the EFA installer's plugin, ``<prefix>/opt/amazon/ofi-nccl/lib*`` and their
   ``<triplet>-linux-gnu`` subfolders (installer 1.30+ on Debian/Ubuntu put it there);
3. the EFA installer's libfabric, ``<prefix>/opt/amazon/efa/lib*`` (the plugin links to it).

They come after the user's own ``LD_LIBRARY_PATH`` entries (a plugin the user put on the path
wins) and are never repeated. ``<prefix>`` is ``HPCFLOW_BOOTSTRAP_PREFIX`` (the bootstrap's own
variable for a sandbox root; empty on a real node).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: The state file bootstrap step 20-nccl writes (bootstrap/steps/20-nccl.sh, ``plugin``).
RECORDED_DIR_FILE = "var/lib/hpcflow/bootstrap/ofi-nccl.dir"
#: The bootstrap's sandbox-root variable (bootstrap/lib/common.sh).
ENV_PREFIX = "HPCFLOW_BOOTSTRAP_PREFIX"


def candidate_dirs(prefix: str, recorded: str | None,
                   expand: Callable[[str], list[str]] = glob.glob) -> list[str]:
    """The plugin directories to look at, in order (before checking that they exist).

    Args:
        prefix: the sandbox root (``""`` on a real node), without a trailing slash.
        recorded: the first line of the state file 20-nccl wrote, or None.
        expand: glob expansion (``glob.glob``), injectable for tests.
    """
    out = [recorded.strip()] if recorded and recorded.strip() else []
    for lib in sorted(expand(f"{prefix}/opt/amazon/ofi-nccl/lib*")):
        out.append(lib)
        out.extend(sorted(expand(f"{lib}/*-linux-gnu")))
    out.extend(sorted(expand(f"{prefix}/opt/amazon/efa/lib*")))
    return out


def joined_path(current: str | None, dirs: Sequence[str],
                is_dir: Callable[[str], bool] = os.path.isdir) -> str:
    """``current`` (the user's ``LD_LIBRARY_PATH``, kept as it is) followed by each of ``dirs``
    that exists and is not on it yet. Pure but for ``is_dir``."""
    have = [p for p in (current or "").split(":") if p]
    extra = []
    for d in dirs:
        if d and d not in have and d not in extra and is_dir(d):
            extra.append(d)
    return ":".join([*(current.split(":") if current else []), *extra]) if extra \
        else (current or "")


def read_recorded(prefix: str) -> str | None:
    """The directory 20-nccl recorded under ``prefix``, or None (no file, unreadable)."""
    try:
        with open(Path(f"{prefix}/{RECORDED_DIR_FILE}"), encoding="utf-8") as fh:
            return fh.readline(4096).strip() or None
    except OSError:
        return None


def plugin_ld_library_path(environ: Mapping[str, str]) -> str:
    """The ``LD_LIBRARY_PATH`` a job on this node should run with (see the module docstring)."""
    prefix = environ.get(ENV_PREFIX, "").rstrip("/")
    return joined_path(environ.get("LD_LIBRARY_PATH"),
                       candidate_dirs(prefix, read_recorded(prefix)))


def main() -> int:
    """Print the path; exit 0. Never fails: at worst it prints the user's path unchanged."""
    print(plugin_ld_library_path(os.environ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
