"""``python -m hpcflow.runtime`` runs the example training program (same as ``.train``)."""

from hpcflow.runtime.train import exit_now, main

if __name__ == "__main__":
    exit_now(main())
