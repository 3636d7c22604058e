"""Where a process sits in a SageMaker training job, from the container's own description.

SageMaker starts one container per instance ("host") with ``/opt/ml`` laid out in it
(developer guide, "How Amazon SageMaker AI Runs Your Training Image", "Distributed training
configuration":
https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html):

- ``/opt/ml/input/config/resourceconfig.json``: ``current_host`` (``algo-1``, ...), ``hosts``
  (every host, sorted) and ``network_interface_name``;
- the checkpoint folder, ``/opt/ml/checkpoints`` unless ``CheckpointConfig.LocalPath`` says
  otherwise, filled from ``CheckpointConfig.S3Uri`` before the program starts and synced back to
  it while it runs (developer guide, "Checkpoints in Amazon SageMaker AI",
  https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html). No variable names it
  (developer guide, "SageMaker AI environment variables and the default paths for training
  storage locations"); a request with a ``CheckpointConfig`` gets it in
  ``/opt/ml/input/config/checkpointconfig.json`` (``LocalPath``), the file AWS's own containers
  read (sagemaker-debugger's ``DEFAULT_CHECKPOINT_CONFIG_FILE``,
  https://github.com/awslabs/sagemaker-debugger/blob/master/smdebug/core/config_constants.py;
  sagemaker-xgboost-container's checkpointing,
  https://github.com/aws/sagemaker-xgboost-container/pull/32);
- a stop or a spot interruption: SIGTERM, then termination 120 s later (API Reference,
  ``StoppingCondition`` and ``StopTrainingJob``:
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html).

The ``sagemaker-training`` toolkit exports ``SM_CURRENT_HOST``, ``SM_HOSTS`` (a JSON list) and
``SM_NETWORK_INTERFACE_NAME`` to the program; outside SageMaker its ``SAGEMAKER_BASE_DIR``
names the folder that stands for ``/opt/ml`` (toolkit ``src/sagemaker_training/environment.py``),
which hpcflow honours too, so tests lay ``/opt/ml`` out under a temporary folder. The toolkit's
torchrun launcher uses the first host as the rendezvous host and port 7777 (toolkit
``src/sagemaker_training/torch_distributed.py``); without torchrun, the toolkit runs the
program once per host.

Pure apart from reading the resource config and checkpoint config files. No torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: The container root, and the variable that moves it (the toolkit's name).
DEFAULT_BASE = "/opt/ml"
BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
RESOURCE_CONFIG = "input/config/resourceconfig.json"
#: Where SageMaker writes the request's ``CheckpointConfig`` (``LocalPath``, ``S3Uri``).
CHECKPOINT_CONFIG = "input/config/checkpointconfig.json"
#: CheckpointConfig.LocalPath's default, under the container root (SageMaker API Reference).
CHECKPOINT_SUBDIR = "checkpoints"
#: The rendezvous port of the toolkit's torchrun launcher (torch_distributed.py, MASTER_PORT).
MASTER_PORT = 7777
#: What the toolkit exports to the program.
SM_CURRENT_HOST = "SM_CURRENT_HOST"
SM_HOSTS = "SM_HOSTS"
SM_NETWORK_INTERFACE_NAME = "SM_NETWORK_INTERFACE_NAME"
#: Bound on the resource config read (it lists a few hundred hosts at most).
_MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ResourceConfig:
    """The part of ``resourceconfig.json`` hpcflow uses.

    Attributes:
        current_host: this container's host name (``algo-2``).
        hosts: every host of the job, sorted as SageMaker lists them.
        network_interface_name: the interface the container's traffic uses (``eth0``), or None.
    """

    current_host: str
    hosts: tuple[str, ...]
    network_interface_name: str | None = None

    @property
    def node_rank(self) -> int:
        """This host's index among the hosts."""
        return self.hosts.index(self.current_host)


def container_base(environ: Mapping[str, str]) -> Path:
    """The folder that stands for ``/opt/ml``: ``SAGEMAKER_BASE_DIR``, else ``/opt/ml``."""
    return Path(environ.get(BASE_DIR_ENV, "").strip() or DEFAULT_BASE)


def in_container(environ: Mapping[str, str]) -> bool:
    """Whether the environment says it is a SageMaker training container: the toolkit's
    ``SM_CURRENT_HOST`` or ``SAGEMAKER_BASE_DIR`` is set. No file access."""
    return bool(environ.get(SM_CURRENT_HOST, "").strip() or environ.get(BASE_DIR_ENV, "").strip())


def default_checkpoint_dir(environ: Mapping[str, str]) -> Path | None:
    """The folder SageMaker syncs, inside a SageMaker container (:func:`in_container`): the
    ``LocalPath`` of ``checkpointconfig.json`` (:func:`checkpoint_local_path`) when the file
    exists, else ``<container root>/checkpoints``; None elsewhere.

    Raises:
        ValueError: ``checkpointconfig.json`` is garbled (the message names the file).
    """
    if not in_container(environ):
        return None
    return checkpoint_local_path(environ) or container_base(environ) / CHECKPOINT_SUBDIR


def checkpoint_local_path(environ: Mapping[str, str]) -> Path | None:
    """``CheckpointConfig.LocalPath`` from ``checkpointconfig.json`` under the container root,
    or None when the file is absent or gives no ``LocalPath``. A path under ``/opt/ml`` is
    placed under the container root (``SAGEMAKER_BASE_DIR``), as the toolkit places the rest.

    Raises:
        ValueError: the file cannot be read, is not a JSON object, or its ``LocalPath`` is not
            an absolute path (the message names the file and the value).
    """
    path = container_base(environ) / CHECKPOINT_CONFIG
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    local = data.get("LocalPath")
    if local is None or local == "":
        return None
    if not isinstance(local, str) or not local.startswith("/"):
        raise ValueError(f"{path}: LocalPath must be an absolute path, got {local!r}")
    if local == DEFAULT_BASE or local.startswith(DEFAULT_BASE + "/"):
        return container_base(environ) / local[len(DEFAULT_BASE):].lstrip("/")
    return Path(local)


def parse_resource_config(text: str, source: str = RESOURCE_CONFIG) -> ResourceConfig:
    """``resourceconfig.json`` text -> :class:`ResourceConfig`.

    Raises:
        ValueError: not JSON, or ``current_host``/``hosts`` missing, of the wrong type, or the
            current host not among the hosts (the message names ``source`` and the key).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object")
    return _config_from(data.get("current_host"), data.get("hosts"),
                        data.get("network_interface_name"), source)


def _config_from(current: object, hosts: object, ifname: object, source: str) -> ResourceConfig:
    if not isinstance(current, str) or not current:
        raise ValueError(f"{source}: current_host must be a host name, got {current!r}")
    if not (isinstance(hosts, list) and hosts and all(isinstance(h, str) and h for h in hosts)):
        raise ValueError(f"{source}: hosts must be a non-empty list of host names, got {hosts!r}")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"{source}: hosts lists a host twice: {hosts!r}")
    if current not in hosts:
        raise ValueError(f"{source}: current_host {current!r} is not among hosts {hosts!r}")
    return ResourceConfig(current, tuple(hosts), ifname if isinstance(ifname, str) else None)


def resource_config_from(environ: Mapping[str, str]) -> ResourceConfig | None:
    """This container's :class:`ResourceConfig`: from the toolkit's ``SM_CURRENT_HOST`` and
    ``SM_HOSTS`` when both are set, else from ``resourceconfig.json`` under the container root
    when that file exists; None outside SageMaker.

    Raises:
        ValueError: the variables or the file are garbled (the message names which).
    """
    current, hosts = environ.get(SM_CURRENT_HOST, "").strip(), environ.get(SM_HOSTS, "").strip()
    if current and hosts:
        try:
            host_list = json.loads(hosts)
        except ValueError:
            raise ValueError(f"{SM_HOSTS}={hosts!r} is not a JSON list of host names") from None
        return _config_from(current, host_list, environ.get(SM_NETWORK_INTERFACE_NAME) or None,
                            f"{SM_CURRENT_HOST}/{SM_HOSTS}")
    path = container_base(environ) / RESOURCE_CONFIG
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > _MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: larger than {_MAX_CONFIG_BYTES} bytes")
    return parse_resource_config(raw.decode("utf-8", errors="replace"), str(path))


def toolkit_variables(config: ResourceConfig) -> dict[str, str]:
    """The toolkit's ``SM_CURRENT_HOST``, ``SM_HOSTS`` and (when known)
    ``SM_NETWORK_INTERFACE_NAME`` for ``config``, for a launcher that stands in for it."""
    env = {SM_CURRENT_HOST: config.current_host, SM_HOSTS: json.dumps(list(config.hosts))}
    if config.network_interface_name:
        env[SM_NETWORK_INTERFACE_NAME] = config.network_interface_name
    return env


def rendezvous(environ: Mapping[str, str], config: ResourceConfig) -> tuple[str, int]:
    """``(MASTER_ADDR, MASTER_PORT)``: the first host and the toolkit's port 7777, unless the
    environment pins either (``MASTER_ADDR``/``MASTER_PORT`` always win, as under Slurm).

    Raises:
        ValueError: ``MASTER_PORT`` is not a TCP port.
    """
    addr = environ.get("MASTER_ADDR", "").strip() or config.hosts[0]
    text = environ.get("MASTER_PORT", "").strip()
    if not text:
        return addr, MASTER_PORT
    if not text.isdecimal() or not 1 <= int(text) <= 65535:
        raise ValueError(f"MASTER_PORT={text!r} is not a TCP port (1-65535)")
    return addr, int(text)


def host_local_checkpoints(environ: Mapping[str, str]) -> bool:
    """Whether each host has its own checkpoint folder (a SageMaker job of several instances:
    every container syncs its own local folder to the one S3 prefix)."""
    try:
        config = resource_config_from(environ)
    except ValueError:
        return False
    return config is not None and len(config.hosts) > 1

