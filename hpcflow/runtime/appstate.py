"""A training loop's own objects as one DCP ``Stateful``: what :class:`hpcflow.runtime.Run` saves.

The user hands :meth:`Run.restore <hpcflow.runtime.run.Run.restore>` a mapping of named objects.
Each value is treated by what it is:

- a ``torch.nn.Module`` (plain, DDP, FSDP2, tensor-parallel, a pipeline stage):
  ``get_model_state_dict`` / ``set_model_state_dict``, so sharded parameters stay sharded and
  a checkpoint reshards onto another layout (torch.distributed.checkpoint.state_dict docs);
- a ``torch.optim.Optimizer``: ``get_optimizer_state_dict`` with the module of the mapping that
  owns its parameters, flattened to parameter names (as torchtitan does) so pipeline stages never
  load another stage's param groups;
- :class:`PerRank` around an object: its state differs per rank (a per-rank data iterator), so
  each rank stores its own copy under ``rank_<r>``;
- anything else with ``state_dict()`` / ``load_state_dict()`` (LR scheduler, sampler, a small
  dict-like object): stored once; it must be the same on every rank (DCP keeps one copy of a
  non-tensor entry).

Every rank's RNG streams (torch CPU/CUDA, Python ``random``, numpy) are stored too, under
:data:`RNG_KEY`, and put back when the world size is the one that saved them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcflow.runtime.rng import restore_rng_state_bytes, rng_state_bytes

#: Reserved key of the per-rank RNG blobs; a user object may not use it.
RNG_KEY = "hpcflow_rng"


class PerRank:
    """Marks an object whose state differs from rank to rank; each rank saves and loads its own.

    A checkpoint with per-rank state loads only onto the same number of ranks.

    Args:
        obj: anything with ``state_dict()`` and ``load_state_dict(state)``.
    """

    def __init__(self, obj: Any) -> None:
        _check_stateful("PerRank(...)", obj)
        self.obj = obj


class AppState:
    """The mapping of a loop's objects, plus this rank's RNG streams, as one ``Stateful``.

    Args:
        objects: name -> module, optimizer, :class:`PerRank` or stateful object.
        rank: this process's global rank.
        rng: save this rank's RNG streams (False when an object of the mapping keeps them).
        restore_rng: put the RNG streams back on load (False after a world-size change, when
            the saved streams belong to other ranks).

    Raises:
        TypeError: a value has no ``state_dict``/``load_state_dict``; the message names the key.
        ValueError: a key is :data:`RNG_KEY`, or an optimizer's parameters belong to none (or
            more than one) of the modules in the mapping.
    """

    def __init__(self, objects: Mapping[str, Any], rank: int, *, rng: bool = True,
                 restore_rng: bool = True) -> None:
        if RNG_KEY in objects:
            raise ValueError(f"state key {RNG_KEY!r} is reserved for hpcflow's RNG streams")
        for name, obj in objects.items():
            _check_stateful(f"state[{name!r}]", obj)
        self.objects = dict(objects)
        self.rank = rank
        self.rng = rng
        self.restore_rng = rng and restore_rng
        self._owners = {name: self._owner(name, obj) for name, obj in self.objects.items()
                        if _is_optimizer(obj)}

    def state_dict(self) -> dict[str, Any]:
        """The DCP state of every object (called by DCP at save time)."""
        from torch.distributed.checkpoint.state_dict import (
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        out: dict[str, Any] = {}
        for name, obj in self.objects.items():
            if _is_module(obj):
                out[name] = get_model_state_dict(obj, options=_options())
            elif _is_optimizer(obj):
                model = self.objects[self._owners[name]]
                out[name] = get_optimizer_state_dict(model, obj, options=_options())
            elif isinstance(obj, PerRank):
                out[name] = {f"rank_{self.rank}": obj.obj.state_dict()}
            else:
                out[name] = obj.state_dict()
        if self.rng:
            out[RNG_KEY] = {f"rank_{self.rank}": rng_state_bytes()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put ``state`` (as read by DCP into :meth:`state_dict`'s shape) back into the objects."""
        from torch.distributed.checkpoint.state_dict import (
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        for name, obj in self.objects.items():
            if _is_module(obj):
                set_model_state_dict(obj, state[name], options=_options())
            elif _is_optimizer(obj):
                model = self.objects[self._owners[name]]
                set_optimizer_state_dict(model, obj, state[name], options=_options())
            elif isinstance(obj, PerRank):
                obj.obj.load_state_dict(state[name][f"rank_{self.rank}"])
            else:
                obj.load_state_dict(state[name])
        if self.restore_rng:
            restore_rng_state_bytes(state[RNG_KEY][f"rank_{self.rank}"])

    def _owner(self, name: str, optimizer: Any) -> str:
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        owners = [key for key, obj in self.objects.items() if _is_module(obj)
                  and params & {id(p) for p in obj.parameters()}]
        if len(owners) != 1:
            found = f"modules {owners}" if owners else "no module"
            raise ValueError(
                f"state[{name!r}]: the optimizer's parameters belong to {found} of the state; "
                "put exactly the one model it optimizes in the same mapping"
            )
        return owners[0]


def _check_stateful(where: str, obj: Any) -> None:
    if isinstance(obj, PerRank):
        return
    if not (callable(getattr(obj, "state_dict", None))
            and callable(getattr(obj, "load_state_dict", None))):
        raise TypeError(
            f"{where} is a {type(obj).__name__}, which has no state_dict()/load_state_dict(); "
            "give a module, an optimizer, a scheduler or another object that has both"
        )


def _is_module(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def _is_optimizer(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.optim.Optimizer)


def _options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(flatten_optimizer_state_dict=True)
