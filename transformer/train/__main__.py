"""``python -m transformer.train``: the command line (cli.py)."""

from .cli import main

raise SystemExit(main())
