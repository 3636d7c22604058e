"""The exceptions hpcflow raises on purpose.

Every error a user can cause is a subclass of :class:`HpcflowError`; the CLI maps each class to
one exit code and prints the message without a traceback (``--debug`` shows it).
"""

from __future__ import annotations


class HpcflowError(Exception):
    """Base class: a failure hpcflow understands and can explain.

    Attributes:
        exit_code: process exit code the CLI uses for this class of error.
    """

    exit_code = 1


class SpecError(HpcflowError):
    """A job or cluster spec is invalid. The message names the field path, the value and what
    is allowed; ``problems`` holds one line per invalid field."""

    exit_code = 2

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class SubmitError(HpcflowError):
    """``sbatch`` (or another submission path) refused the job; carries the command evidence."""

    exit_code = 3


class SlurmQueryError(HpcflowError):
    """A Slurm query or control command (squeue, scontrol, sacct, scancel) failed."""

    exit_code = 4


class SlurmTransitionState(SlurmQueryError):
    """The controller could not change or signal a job now ("Job can not be altered now, try
    again later": it is starting, requeueing or ending)."""


class SlurmUnreachable(SlurmQueryError):
    """The Slurm controller did not answer a query: slurmctld is down, restarting or cut off
    ("Unable to contact slurm controller", or no answer within the query timeout)."""


class CheckpointError(HpcflowError):
    """A checkpoint could not be written, committed or loaded."""

    exit_code = 5


class LocalClusterError(HpcflowError):
    """The local emulated Slurm cluster could not be started, stopped or queried."""

    exit_code = 6


class Ec2Error(HpcflowError):
    """AWS could not be asked: no credentials, no network, access denied, or a throttled call.

    Raised by EC2 ``DescribeInstanceTypes`` (``hpcflow cluster instances --refresh``), the Price
    List API when it was asked for explicitly, and ``hpcflow cluster validate --deep`` when
    ParallelCluster's validators cannot reach AWS. The message carries the AWS error.
    """

    exit_code = 7

