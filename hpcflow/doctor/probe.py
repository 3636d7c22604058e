"""How doctor looks at the node: commands, files, environment and instance metadata.

:class:`Probe` is the one place with side effects; checks receive it, so tests pass a fake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Output:
    """A finished command: its exit status and output (stdout then stderr)."""

    returncode: int
    text: str


class Probe:
    """Read-only access to the node. Every method returns None when the thing is absent."""

    def __init__(self, env: dict[str, str] | None = None, timeout_s: float = 15.0,
                 imds_endpoint: str | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.timeout_s = timeout_s
        self.imds_endpoint = imds_endpoint

    def run(self, argv: list[str]) -> Output | None:
        """Run a command; None when it is not installed. A hang past the timeout is exit 124."""
        exe = shutil.which(argv[0], path=self.env.get("PATH"))
        if exe is None:
            return None
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True,
                                  timeout=self.timeout_s, env=self.env)
        except subprocess.TimeoutExpired:
            return Output(124, f"timed out after {self.timeout_s:g} s")
        except OSError as exc:
            return Output(126, str(exc))
        return Output(proc.returncode, proc.stdout + proc.stderr)

    def read(self, path: str) -> str | None:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def listdir(self, path: str) -> list[str]:
        """Directory entries; raises OSError when the directory is missing."""
        return os.listdir(path)

    def glob(self, pattern: str) -> list[str]:
        import glob

        return sorted(glob.glob(pattern))

    def interfaces(self) -> list[str]:
        try:
            return sorted(os.listdir("/sys/class/net"))
        except OSError:
            return []

    def is_mount(self, path: str) -> bool:
        return os.path.ismount(path)

    def writable_dir(self, path: str) -> str | None:
        """None when a file can be created and removed in ``path``, else the reason."""
        import tempfile

        try:
            with tempfile.NamedTemporaryFile(dir=path, prefix=".hpcflow-doctor-"):
                pass
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    def instance_type(self) -> str | None:
        """The EC2 instance type from the instance metadata service (IMDSv2), or None. Asked
        directly, never through ``http_proxy``/``HTTPS_PROXY``, as the spot watcher asks
        (:class:`hpcflow.aws.imds.ImdsClient`): a proxy would see the token and could answer
        for the metadata service."""
        from hpcflow.aws.imds import DEFAULT_ENDPOINT, ImdsClient, ImdsError

        client = ImdsClient(self.imds_endpoint or DEFAULT_ENDPOINT, timeout_s=1.0,
                            token_ttl_s=60, refresh_margin_s=1.0)
        try:
            status, body = client.get("/latest/meta-data/instance-type")
        except ImdsError:
            return None
        return (body.strip() or None) if status == 200 else None
