"""Every real EC2 instance type name, whether or not hpcflow has facts for it.

Source: the ``InstanceType`` enum of botocore's EC2 service model (installed with boto3), which
lists every name EC2's API accepts, old generations (``p2``, ``p3``, ``g3``, ``f1``, ``dl1``)
included. hpcflow's facts (``ec2_types.tsv``, the offline table) cover the types EC2 still
describes in one region; a name botocore lists is real even when those facts lack it. Without
botocore (hpcflow installed without its ``aws`` extra) only the facts' names are known.
"""

from __future__ import annotations

import functools


@functools.cache
def botocore_names() -> tuple[frozenset[str], str]:
    """(every instance type name botocore's EC2 model lists, where that list came from).

    Costs about 0.3 s once per process (botocore loads the EC2 model); empty with a note when
    botocore is not installed.
    """
    try:
        import botocore

        from hpcflow.aws.requests import enum_values
    except ImportError:
        return frozenset(), "botocore is not installed: only the names of hpcflow's facts table"
    return (frozenset(enum_values("ec2", "InstanceType")),
            f"the InstanceType enum of botocore {botocore.__version__}'s EC2 service model")
