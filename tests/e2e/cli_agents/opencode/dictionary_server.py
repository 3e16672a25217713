"""A small real MCP server (the `mcp` Python SDK, stdio) that opencode's flow offers.

    python dictionary_server.py      # speaks MCP on stdin/stdout

define(word)  a one-line definition from a fixed list
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

WORDS = {"pelican": "a large water bird with a pouch under its beak"}

server = MCPServer("dictionary", instructions="Definitions of a few words.")


@server.tool()
def define(word: str) -> str:
    """Define a word in one line."""
    meaning = WORDS.get(word.lower())
    return f"{word}: {meaning}" if meaning else f"{word}: not in the dictionary"


if __name__ == "__main__":
    server.run("stdio")
