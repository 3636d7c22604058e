"""A local stand-in for SageMaker's side of the container contract, for tests: it runs a
``CreateTrainingJob`` request's containers as processes on this machine.

What it reproduces (developer guide, "How Amazon SageMaker AI Runs Your Training Image" and
"Checkpoints in Amazon SageMaker AI"; sagemaker-training toolkit ``environment.py``):

- one "container" per instance (``ResourceConfig.InstanceCount``), each with its own ``/opt/ml``
  under a temporary folder (``SAGEMAKER_BASE_DIR``) holding ``input/config/resourceconfig.json``
  (``current_host`` ``algo-N``, every host, ``network_interface_name``) and the checkpoint folder;
- the container runs ``ContainerEntrypoint + ContainerArguments`` with ``Environment``; values
  under ``/opt/ml`` point into that container's own folder;
- before a container starts, the checkpoint folder is filled from ``CheckpointConfig.S3Uri``;
  at a stop, each container's folder is synced to it (here at the end of a run, not while it
  runs), a file removed locally being removed from S3 too;
- a stop or spot interruption sends SIGTERM to every container's first process.

The hosts are mapped to loopback with ``MASTER_ADDR``/``MASTER_PORT`` (the names ``algo-N`` do
not resolve here).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTAINER_ROOT = "/opt/ml"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _s3_parts(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


@dataclass
class Container:
    host: str
    base: Path
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self, tag: str) -> list[dict[str, Any]]:
        return [json.loads(line.split(" ", 1)[1]) for line in self.output().splitlines()
                if line.startswith(tag + " ")]


class LocalTrainingJob:
    """One run (first start or restart) of a training job's containers."""

    def __init__(self, request: dict[str, Any], root: Path, s3: Any, base_env: dict[str, str]):
        self.request = request
        self.root = root
        self.s3 = s3
        self.base_env = base_env
        count = request["ResourceConfig"]["InstanceCount"]
        self.hosts = [f"algo-{i + 1}" for i in range(count)]
        self.containers: list[Container] = []

    def _local(self, base: Path, value: str) -> str:
        return str(base) + value[len(CONTAINER_ROOT):] if value.startswith(CONTAINER_ROOT) else value

    def checkpoint_dir(self, base: Path) -> Path:
        return Path(self._local(base, self.request["CheckpointConfig"]["LocalPath"]))

    def start(self) -> None:
        port = free_port()
        for host in self.hosts:
            base = self.root / host / "opt" / "ml"
            config = base / "input" / "config"
            config.mkdir(parents=True)
            (config / "resourceconfig.json").write_text(json.dumps({
                "current_host": host, "hosts": self.hosts, "network_interface_name": "lo"}))
            self._download(self.checkpoint_dir(base))
            env = {**self.base_env,
                   **{k: self._local(base, v) for k, v in self.request["Environment"].items()},
                   "SAGEMAKER_BASE_DIR": str(base), "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": str(port)}
            algo = self.request["AlgorithmSpecification"]
            command = [*algo["ContainerEntrypoint"], *algo["ContainerArguments"]]
            command = [sys.executable if word == "python3" else word for word in command]
            log = self.root / f"{host}.log"
            print("container", host, ":", " ".join(command))
            with open(log, "wb") as fh:
                proc = subprocess.Popen(command, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                        cwd=base, start_new_session=True)
            self.containers.append(Container(host, base, proc, log))

    def wait_for(self, tag: str, predicate: Any, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(predicate(line) for line in self.containers[0].lines(tag)):
                return
            if any(c.proc.poll() is not None for c in self.containers):
                raise AssertionError("a container ended early:\n" + self.dump())
            time.sleep(0.1)
        raise AssertionError(f"no {tag} line in time:\n" + self.dump())

    def interrupt(self) -> None:
        """A spot interruption: SIGTERM to every container's first process."""
        for container in self.containers:
            container.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float = 150) -> list[int]:
        codes = []
        for container in self.containers:
            try:
                codes.append(container.proc.wait(timeout=timeout_s))
            except subprocess.TimeoutExpired:
                os.killpg(container.proc.pid, signal.SIGKILL)
                raise AssertionError("a container did not end:\n" + self.dump()) from None
        return codes

    def sync_up(self) -> None:
        """Each container's checkpoint folder to the S3 prefix; what a container removed
        locally is removed from S3 (the union of every host's files stays)."""
        bucket, prefix = _s3_parts(self.request["CheckpointConfig"]["S3Uri"])
        local_keys: set[str] = set()
        for container in self.containers:
            folder = self.checkpoint_dir(container.base)
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                key = f"{prefix}/{path.relative_to(folder).as_posix()}"
                self.s3.upload_file(str(path), bucket, key)
                local_keys.add(key)
        for key in self._keys(bucket, prefix):
            if key not in local_keys:
                self.s3.delete_object(Bucket=bucket, Key=key)

    def _keys(self, bucket: str, prefix: str) -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                  Prefix=prefix + "/")
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])]

    def _download(self, folder: Path) -> None:
        bucket, prefix = _s3_parts(self.request["CheckpointConfig"]["S3Uri"])
        folder.mkdir(parents=True, exist_ok=True)
        for key in self._keys(bucket, prefix):
            target = folder / key[len(prefix) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            self.s3.download_file(bucket, key, str(target))

    def dump(self) -> str:
        return "\n".join(f"--- {c.host} (exit {c.proc.poll()})\n{c.output()[-6000:]}"
                         for c in self.containers)
