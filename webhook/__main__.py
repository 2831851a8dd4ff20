"""`python -m webhook` is the same as the `netqos-webhook` console script."""

from webhook.cli import main

raise SystemExit(main())
