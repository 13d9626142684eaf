"""``python -m numbakern``: the ``numbakern`` command (see numbakern/teach/cli.py)."""

from .teach.cli import main

if __name__ == "__main__":
    main()
