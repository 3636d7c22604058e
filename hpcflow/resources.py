"""Locate the data folders that ship with hpcflow (sbatch templates, bootstrap scripts,
example cluster configs).

In a wheel they live in ``hpcflow/_data/<name>``; in a source checkout (editable install) they are
the top-level folders of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent
KNOWN = ("sbatch_templates", "bootstrap", "pcluster_configs")


def data_dir(name: str) -> Path:
    """Return the folder ``name`` (one of :data:`KNOWN`).

    Raises:
        ValueError: ``name`` is not a known data folder.
        FileNotFoundError: the folder is missing from both the wheel and the checkout.
    """
    if name not in KNOWN:
        raise ValueError(f"unknown data folder {name!r}; known: {', '.join(KNOWN)}")
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hpcflow data folder {name!r} is missing from this installation")
