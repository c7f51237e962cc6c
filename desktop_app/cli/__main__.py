"""`python -m desktop_app.cli`: the `agent-desk` command."""

from . import main

raise SystemExit(main())
