"""Everything a resume needs, as one DCP ``Stateful`` object (docs/architecture.md, "Checkpoints").

Model and optimizer go through ``torch.distributed.checkpoint.state_dict.get_state_dict`` /
``set_state_dict``, which handle FSDP2, TP and DDP alike (sharded tensors stay sharded); the
optimizer state is flattened to parameter names, so every entry is keyed by a global name and a
checkpoint reshards onto another dp, tp or pp degree. The step, the
sampler position and the LR scheduler are the same on every rank: DCP stores one copy. The RNG
states differ per rank, so each rank stores its own blob under ``rng.rank_<r>``; a resume on the
same layout puts each rank's streams back exactly.

The layout (``{"pp", "dp", "tp"}``) is stored too. A rank's RNG stream belongs to its place in the
mesh, so on another layout the blobs mean nothing: :meth:`TrainState.prepare_load` is told the
saved layout, leaves the ``rng`` entry out of the load, and the run reseeds every rank from
``(seed, step, rank)`` instead (reproducible, but not the streams of the saved run).
"""

from __future__ import annotations

import json
from typing import Any

from hpcflow.runtime.rng import restore_rng_state_bytes, rng_state_bytes


class TrainState:
    """Model, optimizer, LR scheduler, sampler, step and this rank's RNG streams.

    Args:
        model: the (possibly FSDP2- or DDP-wrapped) module.
        optimizer: its optimizer.
        lr_scheduler: an LR scheduler of ``optimizer``, or ``None``.
        sampler: an object with ``state_dict()`` / ``load_state_dict()`` (the data position).
        rank: this process's global rank (keys its RNG blob).
        layout: the parallel layout, e.g. ``{"pp": 2, "dp": 2, "tp": 2}``; stored as JSON.
        reseed: called with the resumed step when the RNG streams are not restored (layout
            changed); it must seed every generator this rank uses.
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        lr_scheduler: Any,
        sampler: Any,
        rank: int,
        *,
        layout: dict[str, int] | None = None,
        reseed: Any = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.sampler = sampler
        self.rank = rank
        self.step = 0
        self.layout = json.dumps(layout or {}, sort_keys=True)
        self.reseed = reseed
        self._load_rng = True

    def prepare_load(self, saved_layout: str | None) -> bool:
        """Decide, before a load, whether this rank's RNG streams come from the checkpoint.

        Args:
            saved_layout: the ``layout`` entry of the checkpoint (JSON), or ``None`` if unknown.

        Returns:
            True if the layouts match and the RNG streams will be restored exactly.
        """
        self._load_rng = saved_layout is None or saved_layout == self.layout
        return self._load_rng

    @property
    def rng_key(self) -> str:
        """Key of this rank's RNG blob inside the ``rng`` entry."""
        return f"rank_{self.rank}"

    def state_dict(self) -> dict[str, Any]:
        """The DCP state: called at save time, so it captures the RNG streams of that moment."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=_options())
        return {
            "model": model_sd,
            "optim": optim_sd,
            "lr_scheduler": self.lr_scheduler.state_dict() if self.lr_scheduler else {},
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            "layout": self.layout,
            **({"rng": {self.rng_key: rng_state_bytes()}} if self._load_rng else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a loaded state back into the live objects.

        Raises:
            ValueError: the sampler or RNG state does not fit this run (see their loaders).
        """
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=_options(),
        )
        if self.lr_scheduler:
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        if self._load_rng:
            restore_rng_state_bytes(state["rng"][self.rng_key])
        elif self.reseed is not None:
            self.reseed(self.step)
        self._load_rng = True  # saves always write this rank's streams


def _options() -> Any:
    """Optimizer state keyed by parameter name, param groups included
    (``flatten_optimizer_state_dict``, as torchtitan does). Unflattened, the param groups are a
    list indexed by position, and DCP keeps one rank's copy of each non-tensor entry: pipeline
    stages, whose groups hold different parameters, would then load another stage's group."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(flatten_optimizer_state_dict=True)
