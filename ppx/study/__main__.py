"""Entry point: `python -m ppx.study NAME [--out DIR] [--dry-run] [overrides...]`."""

from __future__ import annotations

from ppx.study.cli import main

raise SystemExit(main())
