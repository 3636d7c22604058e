"""Capture and restore every random number generator a rank uses, for an exact resume.

Each rank has its own streams (dropout masks differ per rank), so the state is per rank: the torch
CPU generator, the CUDA generator of each visible device when CUDA is present, Python's ``random``
and numpy's global ``RandomState``. torchtitan saves no RNG state
(docs/architecture.md, "Checkpoints"); without it a resumed run with dropout drifts from the
uninterrupted one.
"""

from __future__ import annotations

import pickle
import random
from typing import Any

#: Version of the pickled layout below; bump it when the keys change.
RNG_FORMAT = 1


def capture_rng_state() -> dict[str, Any]:
    """This rank's RNG states as plain picklable values (tensors moved to CPU).

    Returns:
        ``{"format", "python", "numpy", "torch_cpu", "torch_cuda"}``; ``torch_cuda`` is a list
        with one state per visible device, empty without CUDA; ``numpy`` is ``None`` without
        numpy.
    """
    import torch

    try:
        import numpy as np

        numpy_state: Any = np.random.get_state()
    except ImportError:
        numpy_state = None
    cuda_states = (
        [state.cpu() for state in torch.cuda.get_rng_state_all()]
        if torch.cuda.is_available()
        else []
    )
    return {
        "format": RNG_FORMAT,
        "python": random.getstate(),
        "numpy": numpy_state,
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": cuda_states,
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put back states from :func:`capture_rng_state` (same rank, same device count).

    Raises:
        ValueError: ``state`` has another format, or a different number of CUDA devices than
            this process sees.
    """
    import torch

    if state.get("format") != RNG_FORMAT:
        raise ValueError(f"RNG state format {state.get('format')!r}; this code reads {RNG_FORMAT}")
    cuda_states = state["torch_cuda"]
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if len(cuda_states) != visible:
        raise ValueError(
            f"RNG state holds {len(cuda_states)} CUDA generator(s); this process sees {visible}"
        )
    random.setstate(state["python"])
    if state["numpy"] is not None:
        import numpy as np

        np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch_cpu"])
    if cuda_states:
        torch.cuda.set_rng_state_all(cuda_states)


def rng_state_bytes() -> bytes:
    """:func:`capture_rng_state`, pickled: an opaque value DCP stores as one blob per rank."""
    return pickle.dumps(capture_rng_state(), protocol=pickle.HIGHEST_PROTOCOL)


def restore_rng_state_bytes(blob: bytes) -> None:
    """Restore from :func:`rng_state_bytes` (the blob comes from our own checkpoint).

    Raises:
        ValueError: the blob is not an RNG state of this format.
    """
    state = pickle.loads(blob)  # noqa: S301 - written by this module into our own checkpoint
    if not isinstance(state, dict):
        raise ValueError(f"RNG blob holds a {type(state).__name__}, not a state dict")
    restore_rng_state(state)
