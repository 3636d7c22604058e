"""``python -m hpcflow`` is the ``hpcflow`` command."""

from hpcflow.cli.main import main

main()
