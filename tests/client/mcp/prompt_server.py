"""A real MCP server (the SDK's ``MCPServer``) offering prompts and
resources beside a tool, over stdio or, with ``--http HOST:PORT``,
streamable HTTP at ``/mcp``. When ``$PROMPT_SERVER_STARTS`` names a file, a
line is added to it at each start (a test counts the starts)."""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("prompt-server")


@server.tool()
def echo(text: str) -> str:
    """Echoes the text back."""
    return f"echo: {text}"


@server.prompt(name="poem-writer", description="Write a nice haiku")
def poem_writer(title: str, mood: str | None = None) -> str:
    return (f"Write a haiku{f' with the mood {mood}' if mood else ''} called {title}. "
            "Note that a haiku is 5 syllables followed by 7 syllables followed by 5 syllables")


@server.prompt(name="review", description="Review two files")
def review(first: str, second: str) -> str:
    return f"Compare {first} with {second} and say which is better."


@server.prompt(name="standup", description="Summarise the day")
def standup() -> str:
    return "Summarise what I did today in three bullet points."


@server.resource("notes://today", name="today", description="Today's notes", mime_type="text/plain")
def today() -> str:
    return "NOTES-OF-TODAY: buy milk, fix the build"


@server.resource("notes://data.bin", name="data", mime_type="application/octet-stream")
def data() -> bytes:
    return b"\x00\x01\x02binary"


if __name__ == "__main__":
    if os.environ.get("PROMPT_SERVER_STARTS"):
        with open(os.environ["PROMPT_SERVER_STARTS"], "a") as f:
            f.write(f"{os.getpid()}\n")
    if sys.argv[1:2] == ["--http"]:
        host, _, port = sys.argv[2].rpartition(":")
        server.run("streamable-http", host=host, port=int(port))
    else:
        server.run("stdio")
