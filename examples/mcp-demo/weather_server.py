"""A small real MCP server (the `mcp` Python SDK, stdio): the weather agent's tools.

    python weather_server.py      # speaks MCP on stdin/stdout

get_weather(city)  a small fixed forecast
get_time()         the CURRENT time: different on every run, so the flow pins it
delete_city(city)  destructive: it raises, and the flow makes sure it is never reached
"""

from __future__ import annotations

from datetime import UTC, datetime

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather", instructions="Weather lookups for the example agent.")


@server.tool()
def get_weather(city: str) -> str:
    """Get the current weather forecast for a city."""
    return f"{city}: sunny, 24 C"


@server.tool()
def get_time() -> str:
    """Get the current date and time (UTC, ISO 8601)."""
    return datetime.now(UTC).isoformat()


@server.tool()
def delete_city(city: str) -> str:
    """Permanently delete a city from the database. Never needed for weather questions."""
    raise RuntimeError(f"delete_city({city!r}) must never run")


if __name__ == "__main__":
    server.run("stdio")
