"""`python -m flowproof_cli` is the `flowproof` command."""

from flowproof_cli.cli.main import main

main()
