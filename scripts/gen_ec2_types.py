"""Regenerate hpcflow/pcluster/ec2_types.tsv: every EC2 instance type with its EFA support and
the counts ParallelCluster compares across a flexible ``Instances`` list.

Source: EC2 ``DescribeInstanceTypes`` answers for us-east-1 as recorded in moto
(``moto/ec2/resources/instance_types.json.gz``, which moto copies from the real API). Run with
the dev environment (moto installed): ``python scripts/gen_ec2_types.py``.
"""

from __future__ import annotations

import datetime
import gzip
import json
from importlib.metadata import version
from pathlib import Path

import moto

OUT = Path(__file__).resolve().parents[1] / "hpcflow" / "pcluster" / "ec2_types.tsv"


def main() -> None:
    src = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    lines = [f"# EC2 DescribeInstanceTypes (us-east-1) as recorded in moto {version('moto')}: "
             "instance type, EfaSupported (1/0), MaximumEfaInterfaces, DefaultVCpus, "
             "DefaultCores, NVIDIA GPUs, GPU manufacturer, AWS inference accelerators, "
             "inference accelerator manufacturer ('-': none)",
             f"# recorded {datetime.date.today().isoformat()}; regenerate with "
             "scripts/gen_ec2_types.py (and set FACTS_RECORDED in catalog.py)"]
    for name in sorted(data):
        item = data[name]
        net = item.get("NetworkInfo") or {}
        efa = 1 if net.get("EfaSupported") else 0
        ifaces = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0))
        cpu = item.get("VCpuInfo") or {}
        gpus = (item.get("GpuInfo") or {}).get("Gpus") or []
        nvidia = sum(g.get("Count", 0) for g in gpus if g.get("Manufacturer", "").upper() == "NVIDIA")
        accs = (item.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
        aws_accs = sum(a.get("Count", 0) for a in accs if a.get("Manufacturer", "").upper() == "AWS")
        row = [name, efa, ifaces, cpu.get("DefaultVCpus", -1), cpu.get("DefaultCores", -1), nvidia,
               _maker(gpus), aws_accs, _maker(accs)]
        lines.append("\t".join(str(x) for x in row))
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(data)} types)")


def _maker(devices: list) -> str:
    """The manufacturer of the devices (ParallelCluster takes one; EC2 lists one per type)."""
    makers = sorted({d.get("Manufacturer", "") for d in devices})
    return (makers[0] or "-") if makers else "-"


if __name__ == "__main__":
    main()
