"""`python -m flowproof_cli` is the `flowproof` command."""

import sys

if sys.argv[1:2] == ["mcp-stdio"]:
    # The MCP stand-in starts once per server per agent run: skip loading the proxy engine.
    from flowproof_cli.cli.mcp_stdio import mcp_stdio

    mcp_stdio.main(sys.argv[2:], prog_name="flowproof mcp-stdio")
else:
    from flowproof_cli.cli.main import main

    main()
