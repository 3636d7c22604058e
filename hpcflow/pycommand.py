"""The shape of a Python command line, as a warm standby (``resilience.warm_standby``) needs
to know it: the interpreter's name, the options it passes on, and the split of the words after
the interpreter (python(1), "Command line")."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["PYTHON_NAME_RE", "STANDBY_PYTHON_OPTIONS", "split_python_options"]

#: An interpreter's command name: ``python``, ``python3``, ``python3.11``.
PYTHON_NAME_RE = re.compile(r"python(\d+(\.\d+)*)?")

#: Interpreter options a warm standby passes on (``python -u -m MODULE``; none takes an
#: argument): they go before ``-m hpcflow.runtime.standby``.
STANDBY_PYTHON_OPTIONS = ("-u", "-B", "-O", "-OO", "-s", "-E")


#: One word of those options, alone or joined as the interpreter takes them (``-uB``, ``-OO``).
_OPTION_WORD = re.compile("-[" + "".join(o[1] for o in STANDBY_PYTHON_OPTIONS) + "]+")


def split_python_options(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """The words after a Python interpreter, split into its leading options of
    :data:`STANDBY_PYTHON_OPTIONS` (alone or joined: ``-uB``) and the rest (``-m MODULE ...``
    or ``SCRIPT ...``)."""
    n = 0
    while n < len(words) and _OPTION_WORD.fullmatch(words[n]):
        n += 1
    return list(words[:n]), list(words[n:])
