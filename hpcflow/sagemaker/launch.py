"""The first program of a SageMaker training container that ``hpcflow submit`` renders
(``ContainerEntrypoint``): one torchrun per instance, as the ``sagemaker-training`` toolkit's
torchrun launcher starts it (toolkit ``src/sagemaker_training/torch_distributed.py``:
``--nnodes`` the host count, ``--nproc_per_node``, the first host as ``--master_addr`` on port
7777, the host's index as ``--node_rank``).

Usage (in the container)::

    python3 -m hpcflow.sagemaker.launch --nproc-per-node 8 -- python3 -m pkg.train --lr 3e-4

The hosts come from ``resourceconfig.json`` under the container root (``/opt/ml``, or
``SAGEMAKER_BASE_DIR``; :mod:`hpcflow.runtime.sagemaker_env`); the toolkit's ``SM_CURRENT_HOST``
and ``SM_HOSTS`` are exported to the ranks when the container does not set them already, so
``hpcflow.runtime`` knows each host keeps its own checkpoint folder. ``MASTER_ADDR`` and
``MASTER_PORT`` in the environment win (a local emulation maps the hosts to loopback).

The launcher replaces itself with torchrun (``exec``), so SageMaker's SIGTERM at a stop or a
spot interruption reaches torchrun, which passes it to every rank: ranks on
``hpcflow.runtime.Run`` take it as the warning, save at the next step boundary, commit and exit
(SageMaker allows 120 s before SIGKILL: API Reference, ``StoppingCondition``). torchrun itself
kills its workers ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` seconds after passing SIGTERM on (30 by
default, torch ``distributed/launcher/api.py``); the launcher sets it to
:data:`SHUTDOWN_TIMEOUT_S` unless the container sets it, so a save that takes longer than 30 s
still commits. A program that does not use ``Run`` is started and stopped the same way,
untouched.

Exit status: 2 for a usage or resource-config problem (said on stderr); otherwise torchrun's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from hpcflow.runtime import sagemaker_env

#: Seconds torchrun waits for its workers after passing SIGTERM on, before SIGKILL: SageMaker's
#: 120 s after its SIGTERM (API Reference, ``StoppingCondition``) less 10 s for torchrun to end.
SHUTDOWN_TIMEOUT_S = 110
SHUTDOWN_TIMEOUT_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"


def torchrun_command(nproc_per_node: int, program: Sequence[str], environ: Mapping[str, str],
                     python: str = sys.executable) -> tuple[list[str], dict[str, str]]:
    """The torchrun command line for this host, and the variables to add to its environment (the
    toolkit's ``SM_*`` and torchrun's shutdown timeout, each only where ``environ`` lacks it).

    Raises:
        ValueError: no resource config, or a garbled one (the message names it).
    """
    config = sagemaker_env.resource_config_from(environ)
    if config is None:
        raise ValueError(f"no {sagemaker_env.RESOURCE_CONFIG} under "
                         f"{sagemaker_env.container_base(environ)} (is this a SageMaker training "
                         f"container? elsewhere set {sagemaker_env.BASE_DIR_ENV})")
    addr, port = sagemaker_env.rendezvous(environ, config)
    command = [python, "-m", "torch.distributed.run", "--nnodes", str(len(config.hosts)),
               "--nproc-per-node", str(nproc_per_node), "--node-rank", str(config.node_rank),
               "--master-addr", addr, "--master-port", str(port), "--no-python", *program]
    ours = {**sagemaker_env.toolkit_variables(config), SHUTDOWN_TIMEOUT_ENV: str(SHUTDOWN_TIMEOUT_S)}
    extra = {k: v for k, v in ours.items() if k not in environ}
    return command, extra


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and exec torchrun; returns only on a problem (status 2)."""
    parser = argparse.ArgumentParser(prog="python -m hpcflow.sagemaker.launch",
                                     description="Start one torchrun on this SageMaker host.")
    parser.add_argument("--nproc-per-node", type=int, required=True,
                        help="Ranks on this host (the job spec's tasks_per_node).")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="-- then the program and its arguments.")
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program or args.nproc_per_node < 1:
        parser.error("give --nproc-per-node N (N >= 1), then -- and the program")
    try:
        command, extra = torchrun_command(args.nproc_per_node, program, os.environ)
    except ValueError as exc:
        print(f"hpcflow.sagemaker.launch: {exc}", file=sys.stderr, flush=True)
        return 2
    os.environ.update(extra)
    sys.stdout.flush()
    os.execv(command[0], command)
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
