"""``python -m numbakern``: the ``numbakern`` command (see numbakern/cli.py)."""

from .cli import main

if __name__ == "__main__":
    main()
