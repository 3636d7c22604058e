"""``python -m hpcflow.runtime`` runs the example training program (same as ``.train``)."""

import sys

from hpcflow.runtime.train import main

if __name__ == "__main__":
    sys.exit(main())
