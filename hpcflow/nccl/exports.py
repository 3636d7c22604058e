"""What a job spec's ``network`` block exports in its batch script: the NCCL/EFA preset for the
instance type (:mod:`hpcflow.nccl.presets`) and the runtime's network check settings
(docs/protocol.md, "The network check"). The renderer (:func:`hpcflow.slurm.render.render_sbatch`)
takes the result as it is."""

from __future__ import annotations

from hpcflow import protocol
from hpcflow.nccl.presets import Versions, node_facts, preset_env
from hpcflow.slurm.render import NetworkExports
from hpcflow.spec.job import JobSpec


def network_problems(spec: JobSpec) -> list[str]:
    """What the ``network`` block asks that its instance type cannot give, per hpcflow's
    instance catalog (:func:`hpcflow.nccl.presets.node_facts`); empty for an instance type the
    catalog does not know (nothing to check it against).

    - ``require_efa: true`` where the runtime's EFA check cannot run: the type has no EFA, or
      no NVIDIA GPUs (the check reads NCCL's log of a GPU job), so the job would never stop on
      a fall back to TCP sockets as asked.
    - ``gpus_per_node`` above the type's NVIDIA GPUs: Slurm could never place the job on it.
    """
    net = spec.network
    facts = node_facts(net.instance_type) if net is not None else None
    if net is None or facts is None:
        return []
    where = f"(instance catalog, {facts.source})"
    out = []
    if net.require_efa is True and not facts.efa_gpu:
        lacks = ("has no EFA" if not facts.efa_interfaces else
                 "has EFA but no NVIDIA GPUs, where the runtime's EFA check does not run")
        out.append(f"network.require_efa: true, but {net.instance_type} {lacks} {where}; leave "
                   "require_efa out (or false) on this type, or choose a type with EFA and "
                   "NVIDIA GPUs such as p5.48xlarge")
    gpus = spec.gpus_per_node
    if gpus is not None and facts.nvidia_gpus and gpus > facts.nvidia_gpus:
        out.append(f"gpus_per_node: {gpus} is more than the {facts.nvidia_gpus} GPUs of "
                   f"{net.instance_type} {where}; at most {facts.nvidia_gpus}")
    return out


def network_exports(spec: JobSpec) -> NetworkExports | None:
    """The ``network`` block's exports, or None without the block.

    The settings: the NCCL/EFA preset variables, leaving out every name the spec's ``env`` sets
    (the user's value wins), then, on an instance type with EFA and NVIDIA GPUs, the runtime's
    network check settings (:func:`network_check_env`). ``preset: false`` drops only the preset
    variables.
    """
    net = spec.network
    if net is None:
        return None
    settings: list[tuple[str, str, str]] = []
    if net.preset:
        preset = preset_env(net.instance_type, Versions(ofi_nccl=net.ofi_nccl_version))
        settings = [(s.name, s.value, f"{s.why} ({s.to_dict()['source']})")
                    for s in preset.settings if s.name not in spec.env]
    nics = efa_expected(spec)
    return NetworkExports(tuple(settings + network_check_env(spec, nics)), nics)


def efa_expected(spec: JobSpec) -> int:
    """EFA interfaces of the spec's instance type when NCCL is expected to run over EFA there
    (EFA and NVIDIA GPUs, hpcflow's instance catalog), else 0."""
    if spec.network is None:
        return 0
    facts = node_facts(spec.network.instance_type)
    return facts.efa_interfaces if facts is not None and facts.efa_gpu else 0


def network_check_env(spec: JobSpec, nics: int) -> list[tuple[str, str, str]]:
    """``HPCFLOW_NETWORK_INSTANCE_TYPE``, ``HPCFLOW_EFA_EXPECTED`` and ``HPCFLOW_REQUIRE_EFA``
    for the runtime's network check; empty where EFA is not expected (``nics`` 0).
    ``network.require_efa`` unset means true."""
    if not nics or spec.network is None:
        return []
    itype = spec.network.instance_type
    require = spec.network.require_efa is not False
    why = (f"{itype} has {nics} EFA interfaces (instance catalog): the runtime checks that NCCL "
           "runs over them")
    return [(protocol.ENV_NETWORK_INSTANCE_TYPE, itype, why),
            (protocol.ENV_EFA_EXPECTED, str(nics), why),
            (protocol.ENV_REQUIRE_EFA, "1" if require else "0",
             "network.require_efa: a fall back to TCP sockets " +
             ("ends the job" if require else "is only recorded"))]
