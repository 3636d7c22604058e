"""A sandbox for running the bootstrap scripts for real: a root directory, stub commands for what
needs hardware (nvidia-smi, fi_info, the EFA installer's own install step) and a local HTTP server
that serves the downloads."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BOOTSTRAP = REPO / "bootstrap"

NVIDIA_SMI = """#!/usr/bin/env bash
# stub: HPCFLOW_STUB_GPUS GPUs of compute capability HPCFLOW_STUB_CAP
n="${HPCFLOW_STUB_GPUS:-8}"
case "$*" in
  -L) for ((i = 0; i < n; i++)); do echo "GPU ${i}: NVIDIA H100 80GB HBM3 (UUID: GPU-${i})"; done ;;
  *compute_cap*) for ((i = 0; i < n; i++)); do echo "${HPCFLOW_STUB_CAP:-9.0}"; done ;;
  *) echo "nvidia-smi stub: $*" ;;
esac
"""

FI_INFO = """#!/usr/bin/env bash
# stub: HPCFLOW_STUB_EFA EFA domains, in fi_info's format
n="${HPCFLOW_STUB_EFA:-32}"
((n > 0)) || { echo "fi_getinfo: -61 (No data available)" >&2; exit 1; }
for ((i = 0; i < n; i++)); do
  printf 'provider: efa\\n    fabric: efa\\n    domain: rdmap%ss0-rdm\\n    version: 122.0\\n' "${i}"
  printf '    type: FI_EP_RDM\\n    protocol: FI_PROTO_EFA\\n'
done
"""

# The EFA installer's own install step, stubbed: records its call and what a real install leaves.
EFA_INSTALLER = """#!/usr/bin/env bash
set -euo pipefail
root="${HPCFLOW_PREFIX:?}"
echo "$@" >>"${root}/efa-installer-calls"
mkdir -p "${root}/opt/amazon/efa/lib" "${root}/opt/amazon/ofi-nccl/lib" "${root}/opt/amazon/openmpi"
: >"${root}/opt/amazon/ofi-nccl/lib/libnccl-net.so"
printf '# EFA installer version: 1.34.0\\n# Debug packages installed: no\\n' \\
  >"${root}/opt/amazon/efa_installed_packages"
echo "EFA installer stub done"
"""

# Source trees whose build is a plain Makefile (no CUDA here): real make, real install paths.
NCCL_MAKEFILE = (
    "src.install:\n"
    "\tmkdir -p $(PREFIX)/lib $(PREFIX)/include\n"
    "\techo '$(NVCC_GENCODE)' > $(PREFIX)/lib/gencode.txt\n"
    "\techo '$(CUDA_HOME)' > $(PREFIX)/lib/cuda_home.txt\n"
    "\ttouch $(PREFIX)/lib/libnccl.so.2.27.7 $(PREFIX)/include/nccl.h\n"
)
NCCL_TESTS_MAKEFILE = (
    "all:\n"
    "\tmkdir -p build\n"
    "\tprintf '#!/bin/sh\\necho MPI=$(MPI) NCCL_HOME=$(NCCL_HOME)\\n' > build/all_reduce_perf\n"
    "\tchmod +x build/all_reduce_perf\n"
)


def _tarball(files: dict[str, tuple[str, int]], top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (text, mode) in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class Sandbox:
    """One sandbox: ``root`` is the --prefix, ``env`` runs the scripts with stubs and local URLs."""

    root: Path
    www: Path
    url: str
    env: dict[str, str]
    sums: dict[str, str] = field(default_factory=dict)

    def run(self, script: str, *args: str, **env: str):
        import subprocess

        cmd = ["bash", str(BOOTSTRAP / script), "--prefix", str(self.root), *args]
        print("+", " ".join(cmd))
        proc = subprocess.run(cmd, env={**self.env, **env}, capture_output=True, text=True,
                              timeout=120)
        print(proc.stdout, proc.stderr, sep="\n")
        return proc


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@pytest.fixture
def sandbox(tmp_path: Path):
    """A sandbox root with stub hardware commands and an HTTP server on 127.0.0.1 serving
    the EFA installer, NCCL and nccl-tests archives."""
    root, www, stubs = tmp_path / "root-dir", tmp_path / "www", tmp_path / "stubs"
    for d in (root, www, stubs):
        d.mkdir()
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("fi_info", FI_INFO)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    archives = {
        "aws-efa-installer-1.34.0.tar.gz": _tarball(
            {"efa_installer.sh": (EFA_INSTALLER, 0o755)}, "aws-efa-installer"),
        "nccl.tar.gz": _tarball({"Makefile": (NCCL_MAKEFILE, 0o644)}, "nccl-2.27.7-1"),
        "nccl-tests.tar.gz": _tarball({"Makefile": (NCCL_TESTS_MAKEFILE, 0o644)},
                                      "nccl-tests-2.17.6"),
    }
    sums = {}
    for name, data in archives.items():
        (www / name).write_bytes(data)
        sums[name] = hashlib.sha256(data).hexdigest()
    handler = functools.partial(_Quiet, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "HPCFLOW_EFA_URL_BASE": url,
        "HPCFLOW_EFA_SHA256": sums["aws-efa-installer-1.34.0.tar.gz"],
        "HPCFLOW_NCCL_URL": f"{url}/nccl.tar.gz",
        "HPCFLOW_NCCL_SHA256": sums["nccl.tar.gz"],
        "HPCFLOW_NCCL_TESTS_URL": f"{url}/nccl-tests.tar.gz",
        "HPCFLOW_NCCL_TESTS_SHA256": sums["nccl-tests.tar.gz"],
        "HPCFLOW_CUDA_HOME": "/usr/local/cuda",
        "HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP": "1",  # the server above is plain http on loopback
    }
    try:
        yield Sandbox(root, www, url, env, sums)
    finally:
        server.shutdown()
        server.server_close()
