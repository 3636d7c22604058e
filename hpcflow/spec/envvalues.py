"""The values of a job spec's ``env:``: text passed literally, or ``{from_file: PATH}``, a value
the batch script reads at run time so it is never written anywhere by hpcflow.

Where each kind ends up (docs/job-spec.md): a literal value is in ``job.yaml`` (mode 0600) and
``job.sbatch`` (mode 0700) in the run directory (mode 0700), and in the environment of the job's
processes. A ``from_file`` value is read by the batch script on the first node, from the user's
file, into the environment of the job's processes only; ``job.yaml``, ``job.sbatch``,
``--dry-run`` and ``--json`` hold the file's path, never its content.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from hpcflow.spec.job_fields import SpecModel, no_nul, path_text, scalar_to_str

#: How ``--dry-run`` and ``--json`` show a value read from a file (never its content).
MASK = "******"


class EnvFromFile(SpecModel):
    """An ``env`` value read at run time from a file: ``{from_file: ~/.wandb_key}``."""

    from_file: str = Field(description="File the value is read from when the job starts (an "
                                        "absolute or ~/ path); hpcflow never writes the value.")

    def shown(self) -> str:
        """The value as ``--dry-run`` and ``--json`` show it: masked, with where it comes from."""
        return f"{MASK} (read at run time from {self.from_file})"


def _env_value(value: Any) -> str | EnvFromFile:
    """Text (numbers become their text), or a ``{from_file: PATH}`` mapping whose path is
    absolute or starts with ``~`` (expanded now, for the submitting user)."""
    if isinstance(value, EnvFromFile):
        return value
    if isinstance(value, dict):
        if set(value) != {"from_file"}:
            raise ValueError("a mapping here must be exactly {from_file: PATH} (a value read at run "
                             f"time from a file); got the keys {sorted(map(str, value))}")
        path = os.path.expanduser(path_text(value["from_file"]))
        if not os.path.isabs(path):
            raise ValueError("from_file must be an absolute path or start with ~/ (the batch "
                             "script reads it on a compute node, in another folder)")
        return EnvFromFile(from_file=os.path.normpath(path))
    text = scalar_to_str(value)
    if not isinstance(text, str):
        raise ValueError("must be text, or {from_file: PATH} for a value read at run time from a "
                         "file")
    return no_nul(text)


#: One value of ``env``: literal text, or :class:`EnvFromFile`.
EnvValue = Annotated[str | EnvFromFile, BeforeValidator(_env_value)]


def shown_env(env: dict[str, str | EnvFromFile]) -> dict[str, str]:
    """``env`` as ``--dry-run --json`` shows it: literal values as they are, values read from a
    file masked (:meth:`EnvFromFile.shown`)."""
    return {k: v.shown() if isinstance(v, EnvFromFile) else v for k, v in env.items()}
