"""``python -m milkit``: the milkit command line (see milkit.cli)."""

from milkit.cli import main

raise SystemExit(main())
