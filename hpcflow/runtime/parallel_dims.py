"""The parallel layout: degrees checked against the job, and the device mesh built once.

World = pp x dp x tp (docs/architecture.md, "3D layout"). Ranks are laid out with tp innermost
and pp outermost, the order of torchtitan's mesh (pp, dp_replicate, dp_shard, cp, tp) and of
Megatron's default tp-cp-ep-dp-pp: the tp ranks of a group are adjacent, so with srun's block
distribution (ranks 0..n-1 on the first node) a tp group stays inside one node as long as tp
divides the ranks per node. tp traffic (two all-reduces per block, forward and backward) then
never crosses the network; pp (point-to-point activations) and dp (one gradient reduce-scatter per
step) do.

Only the degrees live here; the dimension names and their order are data (:data:`MESH_DIMS`), so
a context- or expert-parallel dimension is one more entry, not a rewrite. Validation is pure (no
torch); :meth:`ParallelDims.build_mesh` is the one collective call.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

#: Mesh dimensions, outermost first. Adding "cp" or "ep" means a degree field, an entry here and
#: a rule in :meth:`ParallelDims._check`.
MESH_DIMS = ("pp", "dp", "tp")


@dataclass
class ParallelDims:
    """Parallel degrees of a job, validated on construction.

    Args:
        dp: data-parallel degree; ``-1`` = the ranks left over (``world_size / (pp * tp)``).
        pp: pipeline-parallel degree (stages across ranks; may span nodes).
        tp: tensor-parallel degree (must divide ``ranks_per_node``: never spans nodes).
        world_size: ranks in the job.
        ranks_per_node: ranks on each node (tasks per node; GPUs per node on a GPU cluster).

    Raises:
        ValueError: a degree is not positive (``dp`` may be -1), ``dp * pp * tp`` is not the
            world size, ``dp = -1`` leaves no whole number, or tp does not divide the ranks of a
            node. The message names the failing product or divisibility and suggests the
            nearest valid layouts.
    """

    dp: int
    pp: int
    tp: int
    world_size: int
    ranks_per_node: int
    _mesh: Any = field(default=None, init=False, repr=False, compare=False)
    _sub: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        for name in ("pp", "tp", "world_size", "ranks_per_node"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        if self.dp == 0 or self.dp < -1:
            raise ValueError(f"dp={self.dp} must be at least 1, or -1 for the remaining ranks")
        if self.world_size % self.ranks_per_node:
            raise ValueError(
                f"world size {self.world_size} is not a multiple of the ranks per node "
                f"{self.ranks_per_node}; every node must run the same number of ranks"
            )
        wanted = f"(dp={self.dp}, pp={self.pp}, tp={self.tp})"
        if self.dp == -1:
            if self.world_size % (self.pp * self.tp):
                raise ValueError(
                    f"dp=-1 needs pp * tp = {self.pp} * {self.tp} = {self.pp * self.tp} to divide "
                    f"the world size {self.world_size}; {self._suggest()}"
                )
            self.dp = self.world_size // (self.pp * self.tp)
        product = self.dp * self.pp * self.tp
        if product != self.world_size:
            raise ValueError(
                f"{wanted}: dp * pp * tp = {self.dp} * {self.pp} * {self.tp} = {product}, but the "
                f"world size is {self.world_size}; {self._suggest()}"
            )
        if self.ranks_per_node % self.tp:
            raise ValueError(
                f"{wanted}: tp={self.tp} does not divide the {self.ranks_per_node} ranks per node, "
                f"so a tensor-parallel group would span nodes; {self._suggest()}"
            )

    def _suggest(self) -> str:
        layouts = nearest_layouts(self.world_size, self.ranks_per_node, self.dp, self.pp, self.tp)
        text = ", ".join(f"(dp={dp}, pp={pp}, tp={tp})" for dp, pp, tp in layouts)
        nodes = self.world_size // self.ranks_per_node if self.ranks_per_node else 0
        return f"valid layouts nearest to it for {nodes} node(s) x {self.ranks_per_node} ranks: {text}"

    @property
    def degrees(self) -> dict[str, int]:
        """``{"pp": ..., "dp": ..., "tp": ...}`` in mesh order."""
        return {name: getattr(self, name) for name in MESH_DIMS}

    def coordinates(self, rank: int) -> dict[str, int]:
        """Where global ``rank`` sits: ``{"pp": p, "dp": d, "tp": t}`` with
        ``rank = (p * dp + d) * tp + t`` (row-major over :data:`MESH_DIMS`, as
        ``init_device_mesh`` lays out ranks).

        Raises:
            ValueError: the rank is not in ``[0, world_size)``.
        """
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is not in [0, {self.world_size})")
        coords = {}
        for name in reversed(MESH_DIMS):
            rank, coords[name] = divmod(rank, getattr(self, name))
        return {name: coords[name] for name in MESH_DIMS}

    def build_mesh(self, device_type: str) -> Any:
        """The ``("pp", "dp", "tp")`` device mesh; built on the first call, then cached.

        Collective on the first call: every rank calls it. The sub-meshes of each dimension are
        sliced once here (torch creates their process groups with the mesh), and their sizes
        are checked against the degrees.

        Args:
            device_type: ``"cuda"`` or ``"cpu"``.

        Returns:
            The ``torch.distributed.device_mesh.DeviceMesh``.

        Raises:
            RuntimeError: the process group's world size differs from ``world_size``, or a
                sub-mesh does not have the expected size.
        """
        if self._mesh is not None:
            return self._mesh
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        actual = dist.get_world_size() if dist.is_initialized() else 1
        if actual != self.world_size:
            raise RuntimeError(
                f"layout {self.degrees} is for {self.world_size} ranks, but the process group "
                f"has {actual}"
            )
        shape = tuple(getattr(self, name) for name in MESH_DIMS)
        mesh = init_device_mesh(device_type, shape, mesh_dim_names=MESH_DIMS)
        for name in MESH_DIMS:
            sub = mesh[name]
            if sub.size() != getattr(self, name):
                raise RuntimeError(f"sub-mesh {name!r} has {sub.size()} ranks, expected "
                                   f"{getattr(self, name)}")
            self._sub[name] = sub
        self._mesh = mesh
        return mesh

    def mesh(self, name: str) -> Any:
        """The cached one-dimensional sub-mesh ``name`` (``"pp"``, ``"dp"`` or ``"tp"``).

        Raises:
            RuntimeError: :meth:`build_mesh` has not run yet.
            KeyError: ``name`` is not a mesh dimension.
        """
        if self._mesh is None:
            raise RuntimeError("build_mesh() must run before sub-meshes are used")
        if name not in self._sub:
            raise KeyError(f"{name!r} is not a mesh dimension; dimensions: {MESH_DIMS}")
        return self._sub[name]

    def describe(self) -> dict[str, int]:
        """The layout for logs and commit records: degrees, world size, ranks per node."""
        return {**self.degrees, "world_size": self.world_size, "ranks_per_node": self.ranks_per_node}


def valid_layouts(world_size: int, ranks_per_node: int) -> list[tuple[int, int, int]]:
    """Every ``(dp, pp, tp)`` with ``dp * pp * tp = world_size`` and ``tp | ranks_per_node``."""
    layouts = []
    for pp, tp in itertools.product(_divisors(world_size), _divisors(ranks_per_node)):
        if world_size % (pp * tp) == 0:
            layouts.append((world_size // (pp * tp), pp, tp))
    return sorted(layouts)


def nearest_layouts(
    world_size: int, ranks_per_node: int, dp: int, pp: int, tp: int, limit: int = 3
) -> list[tuple[int, int, int]]:
    """The ``limit`` valid layouts closest to the requested one: distance is the sum over the
    degrees of ``|log2(valid / requested)|`` (a degree of -1 counts as free); ties favour
    keeping tp, then pp."""

    def distance(layout: tuple[int, int, int]) -> tuple[float, int, int]:
        total = 0.0
        for got, want in zip(layout, (dp, pp, tp), strict=True):
            if want >= 1:
                total += abs(math.log2(got / want))
        return (round(total, 9), abs(layout[2] - tp), abs(layout[1] - pp))

    return sorted(valid_layouts(world_size, ranks_per_node), key=distance)[:limit]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
