"""A real MCP server for tests/mcp.rs, written with the official Python SDK's high-level server
(FastMCP, called MCPServer since the SDK's version 2): one tool, `get_weather`, whose answer
differs from agentry's built-in one, served over Streamable HTTP at
http://127.0.0.1:<port>/mcp, or over standard input and output.
Usage: weather_server.py PORT | weather_server.py stdio
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather-station")


@server.tool()
def get_weather(city: str) -> dict:
    """The weather at a city, as the station measures it."""
    return {"city": city, "temperatureC": 9, "condition": "foggy", "station": "mcp"}


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
