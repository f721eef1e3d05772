"""`python -m batching`: see batching.cli."""

from .cli import main

raise SystemExit(main())
