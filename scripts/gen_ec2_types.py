"""Regenerate hpcflow/pcluster/ec2_types.tsv: every EC2 instance type with its EFA support.

Source: EC2 ``DescribeInstanceTypes`` answers for us-east-1 as recorded in moto
(``moto/ec2/resources/instance_types.json.gz``, which moto copies from the real API). Run with
the dev environment (moto installed): ``python scripts/gen_ec2_types.py``.
"""

from __future__ import annotations

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
             "instance type, EfaSupported (1/0), MaximumEfaInterfaces",
             "# regenerate with scripts/gen_ec2_types.py"]
    for name in sorted(data):
        net = data[name].get("NetworkInfo") or {}
        efa = 1 if net.get("EfaSupported") else 0
        ifaces = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0))
        lines.append(f"{name}\t{efa}\t{ifaces}")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(data)} types)")


if __name__ == "__main__":
    main()
