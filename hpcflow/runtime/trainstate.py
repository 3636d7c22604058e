"""Everything a resume needs, as one DCP ``Stateful`` object (DESIGN.md §3).

Model and optimizer go through ``torch.distributed.checkpoint.state_dict.get_state_dict`` /
``set_state_dict``, which handle FSDP2 and DDP alike (sharded tensors stay sharded). The step, the
sampler position and the LR scheduler are the same on every rank: DCP stores one copy. The RNG
states differ per rank, so each rank stores its own blob under ``rng.rank_<r>``; a resume on the
same layout puts each rank's streams back exactly.
"""

from __future__ import annotations

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
    """

    def __init__(
        self, model: Any, optimizer: Any, lr_scheduler: Any, sampler: Any, rank: int
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.sampler = sampler
        self.rank = rank
        self.step = 0

    @property
    def rng_key(self) -> str:
        """Key of this rank's RNG blob inside the ``rng`` entry."""
        return f"rank_{self.rank}"

    def state_dict(self) -> dict[str, Any]:
        """The DCP state: called at save time, so it captures the RNG streams of that moment."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {
            "model": model_sd,
            "optim": optim_sd,
            "lr_scheduler": self.lr_scheduler.state_dict() if self.lr_scheduler else {},
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            "rng": {self.rng_key: rng_state_bytes()},
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
        )
        if self.lr_scheduler:
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        restore_rng_state_bytes(state["rng"][self.rng_key])
