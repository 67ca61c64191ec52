"""An MCP server written with the official MCP Python SDK (`mcp` on PyPI),
for tests/gateway_interop.rs: the node's gateway calls its tools as an
MCP client the SDK's authors did not write.

Usage: mcp_server.py CERT_PEM KEY_PEM MODE MAX_SESSIONS
  MODE          `json` (the SDK's JSON response mode) or `sse` (its
                default, answers in an event stream)
  MAX_SESSIONS  the most stateful sessions the server keeps open at once

Serves streamable HTTP at https://127.0.0.1:PORT/mcp, stateful (every
request after `initialize` must carry the `Mcp-Session-Id` the server
gave), on a port the system picks. Prints `listening PORT` once it
accepts connections. A client that opens a session and never ends it
(HTTP DELETE) holds one of MAX_SESSIONS until the SDK's idle timeout (30
minutes); past that many, `initialize` is answered 503.
"""

import socket
import sys
from typing import Annotated

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

cert, key, mode, max_sessions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


mcp = MCPServer("interop", version="1.0.0")

# The tools called so far, in order (`called` itself left out): what
# reached the server's tools, whatever the client says it sent.
CALLED: list[str] = []


@mcp.tool()
def called() -> list[str]:
    """The tools called so far, in order."""
    return list(CALLED)


@mcp.tool(structured_output=False)
def echo(text: str) -> str:
    """Returns the text it is given (text content only)."""
    CALLED.append("echo")
    return text


class Reading(BaseModel):
    celsius: float
    sky: str


class Forecast(BaseModel):
    city: str
    days: int
    readings: list[Reading]


@mcp.tool()
def forecast(city: str, days: Annotated[int, Field(ge=1, le=7)] = 1) -> Forecast:
    """A made-up forecast: structured content with an output schema."""
    CALLED.append("forecast")
    return Forecast(
        city=city,
        days=days,
        readings=[Reading(celsius=20.5 + d, sky="clear") for d in range(days)],
    )


@mcp.tool()
def explode(reason: str) -> str:
    """Always fails: the SDK answers the exception as isError."""
    CALLED.append("explode")
    raise ValueError(f"exploded: {reason}")


@mcp.tool()
async def chatty(text: str, ctx: Context) -> str:
    """Logs to the client twice before it answers (in SSE mode, events on
    the request's stream before the response)."""
    CALLED.append("chatty")
    await ctx.info(f"about to answer {text}")
    await ctx.info("almost there")
    return text.upper()


async def main() -> None:
    app = mcp.streamable_http_app(
        json_response=(mode == "json"),
        max_sessions=max_sessions,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        ssl_certfile=cert,
        ssl_keyfile=key,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.02)
        print(f"listening {port}", flush=True)


anyio.run(main)
