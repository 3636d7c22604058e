"""What a job spec's ``network`` block exports in its batch script: the NCCL/EFA preset for the
instance type (:mod:`hpcflow.nccl.presets`) and the runtime's network check settings
(docs/protocol.md, "The network check"). The renderer (:func:`hpcflow.slurm.render.render_sbatch`)
takes the result as it is."""

from __future__ import annotations

from hpcflow import protocol
from hpcflow.nccl.presets import Versions, node_facts, preset_env
from hpcflow.slurm.render import NetworkExports
from hpcflow.spec.job import JobSpec


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
