"""`python -m flowproof_cli` is the `flowproof` command."""

import sys
from collections.abc import Callable
from functools import partial

from flowproof_cli.cli.entry import quiet_interrupts, remember_interrupts

command: Callable[[], object]
stand_in = sys.argv[1:2] == ["mcp-stdio"]
with quiet_interrupts():  # a Ctrl-C while loading: `interrupted`, exit 130, no traceback
    if stand_in:
        # The MCP stand-in starts once per server per agent run: skip loading the engine.
        from flowproof_cli.cli.mcp_stdio import mcp_stdio

        command = partial(mcp_stdio.main, sys.argv[2:], prog_name="flowproof mcp-stdio")
    else:
        from flowproof_cli.cli.main import main as command
if not stand_in:
    remember_interrupts()  # as the console script does: a lost Ctrl-C still ends the run
command()
