"""``hpcflow cluster import``: an existing ParallelCluster config -> the shortest cluster spec
that renders the same config.

How: every part of the config a spec field can say is read into that field (each value checked
against the field's type first; what does not fit is left alone); the spec is rendered; the
difference between that render and the config becomes the spec's ``pcluster:`` block
(:func:`hpcflow.pcluster.merge.raw_delta`); then each field that the render does not need is
dropped. The result is checked: ``render(import(C)) == C`` as data, or the import fails.

A ``null`` value in the config is read as an absent key (the ``pcluster:`` block uses null to
remove a key, so a kept null could not round-trip).

A config without ``Region`` stays without it: ParallelCluster then takes the region from
``pcluster --region`` or the environment at create time, so an added ``Region`` could change where
the config is used. The spec's ``region`` (which hpcflow's own checks need: instance facts, the
schema's environment) is the region found for the import, and the spec's ``pcluster:`` block holds
``Region: null`` so its render leaves ``Region`` out, as the config did.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from hpcflow.errors import HpcflowError, SpecError
from hpcflow.pcluster.builder import build_fields, build_with_sources
from hpcflow.pcluster.builder_storage import KIND
from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import as_dict
from hpcflow.pcluster.import_fields import spec_fields
from hpcflow.pcluster.merge import raw_delta, strip_nulls
from hpcflow.pcluster.region import FoundRegion, find_region
from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.messages import format_loc, short_value


def _validated(spec: dict[str, Any]) -> ClusterSpec:
    """Validate, dropping a field that does not fit (it then travels in the raw block)."""
    for _ in range(200):
        try:
            return ClusterSpec.model_validate(spec)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = [p for p in err["loc"] if not _is_tag(p)]
            if not _drop(spec, loc):
                msg = str(err["msg"]).removeprefix("Value error, ")
                value = "" if err["type"] == "missing" else f"{short_value(err.get('input'))}: "
                raise SpecError(f"cannot import: {format_loc(loc)}: {value}{msg}") from None
    raise SpecError("cannot import: too many fields do not fit the cluster spec")


def _is_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in KIND or part.startswith("function-"))


def _drop(spec: dict[str, Any], loc: list[Any]) -> bool:
    node: Any = spec
    parents: list[tuple[Any, Any]] = []
    for part in loc:
        try:
            child = node[part]
        except (KeyError, IndexError, TypeError):
            break
        parents.append((node, part))
        node = child
    while parents:
        holder, key = parents.pop()
        if isinstance(holder, dict) and key not in ("name", "region", "head_node", "subnet_id",
                                                    "subnet_ids", "max_nodes", "queues",
                                                    "compute"):
            del holder[key]
            return True
        if isinstance(holder, list) and parents and parents[-1][1] == "storage":
            parents[-1][0]["storage"] = []
            return True
    return False


def import_config(cfg: dict[str, Any], name: str | None = None,
                  catalog: Catalog | None = None, region: str | None = None) -> dict[str, Any]:
    """The shortest cluster spec (as plain data) whose render equals ``cfg``.

    Args:
        cfg: a ParallelCluster v3 config dict (Slurm scheduler).
        name: the cluster name to record in the spec.
        catalog: instance facts for the EFA defaults; the offline table when None.
        region: the region for a config without ``Region`` (:func:`hpcflow.pcluster.region.
            find_region`): the spec's ``region`` for hpcflow's checks; the render still has no
            ``Region`` (``pcluster: {Region: null}``), so it equals ``cfg``.

    Raises:
        SpecError: ``cfg`` lacks what every spec needs (Region, HeadNode subnet, Slurm queues
            with subnets and compute resources), naming what is missing.
        HpcflowError: the spec found does not render ``cfg`` back (a bug in hpcflow).
    """
    target = strip_nulls(copy.deepcopy(cfg))
    if as_dict(target.get("Scheduling")).get("Scheduler", "slurm") != "slurm":
        raise SpecError("cannot import: Scheduling.Scheduler must be slurm (hpcflow builds "
                        "Slurm clusters)")
    check_shape(target)
    cat = catalog or Catalog.offline()
    fields = spec_fields(target, name)
    if region is not None and "Region" not in target:
        fields["region"] = region
    spec = _validated(fields)
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data = _with_raw(data, target, cat)
    data = _minimize(data, target, cat)
    if _render(data, cat) != target:
        raise HpcflowError("cluster import: the spec found does not render the config back; "
                           "this is a bug in hpcflow, please report it with the config")
    return data


def _kind(value: Any) -> str:
    """How a message names the YAML kind of ``value``."""
    return ("a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list)
            else "a string" if isinstance(value, str) else "null" if value is None
            else f"a {type(value).__name__}")


def check_shape(cfg: Mapping[str, Any]) -> None:
    """Refuse, before any other work, a config whose queues, compute resources or queue subnets
    are not of the kinds ParallelCluster takes, or that has more queues or compute resources than it
    allows (the import's search renders the config once per field: a config over these bounds
    is refused before that work, not after minutes of it).

    Bounds: :data:`hpcflow.pcluster.rules.MAX_QUEUES` queues, :data:`~hpcflow.pcluster.rules.
    MAX_CR_PER_QUEUE` compute resources per queue and :data:`~hpcflow.pcluster.rules.
    MAX_CR_PER_CLUSTER` in the cluster (aws-parallelcluster ``pcluster/constants.py``:
    ``MAX_NUMBER_OF_QUEUES = 50``, ``MAX_NUMBER_OF_COMPUTE_RESOURCES_PER_CLUSTER =
    MAX_COMPUTE_RESOURCES_PER_QUEUE = 50``), the same bounds ``cluster validate`` holds a
    config to.

    Raises:
        SpecError: naming the key, what it holds and what ParallelCluster takes.
    """
    from hpcflow.pcluster.rules import MAX_CR_PER_CLUSTER, MAX_CR_PER_QUEUE, MAX_QUEUES

    sched = as_dict(cfg.get("Scheduling"))
    qs = sched.get("SlurmQueues")
    if qs is not None and not isinstance(qs, list):
        raise SpecError(f"cannot import: Scheduling.SlurmQueues: {short_value(qs)} is "
                        f"{_kind(qs)}; ParallelCluster takes a list of queues (- Name: ...)")
    qs = qs or []
    if len(qs) > MAX_QUEUES:
        raise SpecError(f"cannot import: Scheduling.SlurmQueues: {len(qs)} queues; "
                        f"ParallelCluster allows at most {MAX_QUEUES}")
    total = 0
    for qi, q in enumerate(qs):
        where = f"Scheduling.SlurmQueues[{qi}]"
        if not isinstance(q, dict):
            raise SpecError(f"cannot import: {where}: {short_value(q)} is {_kind(q)}; "
                            "ParallelCluster takes a queue mapping (Name, Networking, "
                            "ComputeResources)")
        subnets = as_dict(q.get("Networking")).get("SubnetIds")
        if subnets is not None and not (isinstance(subnets, list)
                                        and all(isinstance(s, str) for s in subnets)):
            raise SpecError(f"cannot import: {where}.Networking.SubnetIds: "
                            f"{short_value(subnets)} is {_kind(subnets)}; ParallelCluster takes "
                            "a list of subnet ids, e.g. [subnet-0123456789abcdef0]")
        crs = q.get("ComputeResources")
        if crs is not None and not (isinstance(crs, list)
                                    and all(isinstance(c, dict) for c in crs)):
            raise SpecError(f"cannot import: {where}.ComputeResources: {short_value(crs)} is "
                            f"{_kind(crs)}; ParallelCluster takes a list of compute resource "
                            "mappings (- Name: ..., InstanceType: ...)")
        crs = crs or []
        if len(crs) > MAX_CR_PER_QUEUE:
            raise SpecError(f"cannot import: {where}.ComputeResources: {len(crs)} compute "
                            f"resources; ParallelCluster allows at most {MAX_CR_PER_QUEUE} "
                            "per queue")
        total += len(crs)
    if total > MAX_CR_PER_CLUSTER:
        raise SpecError(f"cannot import: Scheduling.SlurmQueues: {total} compute resources in "
                        f"the cluster; ParallelCluster allows at most {MAX_CR_PER_CLUSTER}")


def _with_raw(data: dict[str, Any], target: dict[str, Any], cat: Catalog) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k != "pcluster"}
    base = build_fields(ClusterSpec.model_validate(data), cat).config
    raw = raw_delta(base, target)
    if raw:
        data["pcluster"] = raw
    return data


def _render(data: dict[str, Any], cat: Catalog) -> dict[str, Any] | None:
    try:
        return build_with_sources(ClusterSpec.model_validate(data), cat).config
    except ValidationError:
        return None


def _leaves(node: Any, path: tuple = ()) -> list[tuple]:
    out: list[tuple] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if path == () and key in ("pcluster", "name"):
                continue
            out.append(path + (key,))
            out += _leaves(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _leaves(value, path + (i,))
    return out


def _minimize(data: dict[str, Any], target: dict[str, Any], cat: Catalog) -> dict[str, Any]:
    """Drop each field (deepest first) whose absence renders the same config without growing
    the raw block; the raw block is recomputed after each drop."""
    for path in sorted(_leaves(data), key=len, reverse=True):
        trial = copy.deepcopy(data)
        holder: Any = trial
        try:
            for part in path[:-1]:
                holder = holder[part]
            if not isinstance(holder, dict) or path[-1] not in holder:
                continue
            del holder[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        try:
            trial = _with_raw(trial, target, cat)
        except ValidationError:
            continue
        # Fields first: a drop that moves a value into the raw block is refused.
        if (_render(trial, cat) == target and _size(trial) < _size(data)
                and _size(trial.get("pcluster")) <= _size(data.get("pcluster"))):
            data = trial
    return data


def _size(data: Any) -> int:
    return 0 if data is None else len(repr(data))


def _check_renders(data: dict[str, Any], config_path: str, catalog: Catalog | None) -> None:
    """Refuse a spec that ``hpcflow cluster render`` would refuse, with render's own message
    (its rules and the ParallelCluster schema, :func:`hpcflow.pcluster.render.check_spec`),
    before the import says it succeeded or writes anything.

    Raises:
        SpecError: one line per problem, as render gives them.
    """
    from hpcflow.pcluster.facts import catalog_with_cache
    from hpcflow.pcluster.render import _raise_on_errors, check_spec

    spec = ClusterSpec.model_validate(data)
    result = check_spec(spec, catalog or catalog_with_cache(spec.region))
    _raise_on_errors(result, config_path, "in the cluster spec imported from it (`hpcflow "
                     "cluster render` would refuse that spec, and `cluster validate` the config)")


def import_file(config_path: str, output: str | None, name: str | None = None,
                catalog: Catalog | None = None, region: str | None = None,
                environ: Mapping[str, str] | None = None
                ) -> tuple[dict[str, Any], str, FoundRegion]:
    """Read a ParallelCluster YAML file, import it, and write the spec YAML to ``output``.

    Args:
        region: ``--region``, used when the config has no ``Region`` (then the environment and
            the AWS config file, as ParallelCluster: :func:`hpcflow.pcluster.region.find_region`).
        environ: the environment to look in (``os.environ`` when None).

    Returns:
        The spec data, its YAML text, and the region with where it came from.

    Raises:
        SpecError: the file is missing, not a YAML mapping, or cannot be imported; the spec it
            gives would be refused by ``hpcflow cluster render`` (its message); or ``output``
            is the input file.
        HpcflowError: ``output`` cannot be written (nothing is left behind).
    """
    from pathlib import Path

    from hpcflow.pcluster.render import _same_file, check_output_name, dump_yaml, write_atomic
    from hpcflow.spec.cluster_loading import load_yaml_file

    if output is not None:
        check_output_name(output)
    if output is not None and _same_file(config_path, output):
        raise SpecError(f"-o {output}: that is the config being imported; give another file, "
                        "e.g. -o cluster.spec.yaml")
    cfg = load_yaml_file(config_path)
    if not cfg:
        raise SpecError(f"{config_path}: the file is empty; give a ParallelCluster YAML config")
    found = find_region(cfg, region, environ)
    data = import_config(cfg, name, catalog, found.region)
    _check_renders(data, config_path, catalog)
    where = "" if found.source == "the config's Region" else \
        (f"\nThe config has no Region: hpcflow checks it in {found.region} (from {found.source});"
         "\nRegion: null in the pcluster: block keeps the render without Region, as the config.")
    text = dump_yaml(data, header=(
        f"hpcflow cluster spec imported from {Path(config_path).name}.{where}\n"
        "`hpcflow cluster render` turns it back into the same ParallelCluster config; keys "
        "without a\nspec field are in the pcluster: block."))
    if output is not None:
        write_atomic(Path(output), text)
    return data, text, found
