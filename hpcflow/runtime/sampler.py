"""A deterministic, resumable data-parallel sampler.

Each epoch is a permutation of the data set drawn from ``seed + epoch`` with a private generator
(the global RNG is untouched). A step takes the next global batch of ``micro_batch * dp`` indices
and gives each dp rank its contiguous slice; the last incomplete batch of an epoch is dropped. The
whole position is ``(epoch, batch)``, which goes into the checkpoint.
"""

from __future__ import annotations

from typing import Any


class ResumableSampler:
    """Yields each dp rank's sample indices, step after step, from a resumable position.

    Args:
        num_samples: samples in the data set.
        micro_batch: samples per dp rank per step.
        dp_rank: this rank's index in the data-parallel group.
        dp_degree: ranks in the data-parallel group.
        seed: base seed of the epoch permutations.

    Raises:
        ValueError: a size is not positive, ``dp_rank`` is out of range, or one global batch
            (``micro_batch * dp_degree``) does not fit in the data set.
    """

    def __init__(
        self, num_samples: int, micro_batch: int, dp_rank: int, dp_degree: int, seed: int = 0
    ) -> None:
        if micro_batch < 1 or dp_degree < 1 or num_samples < 1:
            raise ValueError(
                f"num_samples={num_samples}, micro_batch={micro_batch}, dp_degree={dp_degree}: "
                "all must be positive"
            )
        if not 0 <= dp_rank < dp_degree:
            raise ValueError(f"dp_rank={dp_rank} is not in [0, {dp_degree})")
        if micro_batch * dp_degree > num_samples:
            raise ValueError(
                f"a global batch of {micro_batch} x {dp_degree} samples exceeds the data set "
                f"({num_samples}); lower the micro-batch"
            )
        self.num_samples = num_samples
        self.micro_batch = micro_batch
        self.dp_rank = dp_rank
        self.dp_degree = dp_degree
        self.seed = seed
        self.epoch = 0
        self.batch = 0
        self._perm: Any = None
        self._perm_epoch = -1

    @property
    def batches_per_epoch(self) -> int:
        """Full global batches in one epoch."""
        return self.num_samples // (self.micro_batch * self.dp_degree)

    def next_indices(self) -> Any:
        """This rank's sample indices for the next step (int64 tensor of shape ``[B]``), and
        advance the position by one global batch."""
        import torch

        if self._perm_epoch != self.epoch:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            self._perm = torch.randperm(self.num_samples, generator=gen)
            self._perm_epoch = self.epoch
        global_batch = self.micro_batch * self.dp_degree
        start = self.batch * global_batch + self.dp_rank * self.micro_batch
        indices = self._perm[start : start + self.micro_batch]
        self.batch += 1
        if self.batch == self.batches_per_epoch:
            self.epoch, self.batch = self.epoch + 1, 0
        return indices

    def state_dict(self) -> dict[str, int]:
        """The position plus the sizes it is valid for."""
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "seed": self.seed,
            "global_batch": self.micro_batch * self.dp_degree,
            "num_samples": self.num_samples,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a saved position.

        Raises:
            ValueError: the position was saved with another seed, data set size or global batch
                (the same position would then mean other samples).
        """
        expected = self.state_dict()
        for key in ("seed", "global_batch", "num_samples"):
            if state[key] != expected[key]:
                raise ValueError(
                    f"sampler state has {key}={state[key]}, this run uses {expected[key]}; "
                    "resume with the same seed, data set and global batch"
                )
        self.epoch = int(state["epoch"])
        self.batch = int(state["batch"])
