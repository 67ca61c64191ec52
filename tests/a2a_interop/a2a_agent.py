"""An A2A agent written with the official A2A Python SDK (`a2a-sdk` on
PyPI), for tests/a2a_interop.rs: the node's gateway calls it, and the
node's probe asks it, as an A2A client the SDK's authors did not write.

Usage: a2a_agent.py CERT_PEM KEY_PEM

Serves, on a port the system picks, over HTTPS:
  /.well-known/agent-card.json  the card, as the SDK writes it, declaring
                                JSON-RPC at A2A 1.0 first, then 0.3, both
                                at the same URL
  /a2a/jsonrpc                  the SDK's JSON-RPC endpoint, with its 0.3
                                compatibility on (an `A2A-Version` header
                                picks 1.x; none, 0.3)
  /plain                        not A2A: 200 `text/plain` to any method, as
                                a web server that is no agent answers
Prints `listening PORT` once it accepts connections.

Its skills, chosen by the message's `metadata.skill` (how the node names
the skill it calls):
  upper  completes the task with one text artifact: the input text in
         capitals (a data part's JSON, when there is no text part)
  fail   fails the task, its status message saying why
  ask    stops the task in input-required, asking a question
Anything else is rejected.
"""

import json
import socket
import sys

import anyio
import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import get_data_parts
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)

cert, key = sys.argv[1], sys.argv[2]
RPC_PATH = "/a2a/jsonrpc"


class InteropExecutor(AgentExecutor):
    """Runs the skill the message names (see the module documentation)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task_id, context_id = context.task_id, context.context_id
        if message is None or not task_id or not context_id:
            return
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        skill = json_format.MessageToDict(message.metadata).get("skill")
        say = lambda text: updater.new_agent_message(parts=[Part(text=text)])
        if skill == "upper":
            text = context.get_user_input()
            if not text:
                text = json.dumps(get_data_parts(list(message.parts)), sort_keys=True)
            await updater.add_artifact(parts=[Part(text=text.upper())], name="upper")
            await updater.complete()
        elif skill == "fail":
            await updater.failed(message=say("failed on purpose"))
        elif skill == "ask":
            await updater.requires_input(message=say("which language?"))
        else:
            await updater.reject(message=say(f"no skill {skill!r}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(port: int) -> AgentCard:
    url = f"https://127.0.0.1:{port}{RPC_PATH}"
    skill = lambda id, description: AgentSkill(
        id=id, name=id.capitalize(), description=description, tags=["interop"]
    )
    return AgentCard(
        name="Interop agent",
        description="An A2A agent written with the A2A Python SDK.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            skill("upper", "Answers the input text in capitals."),
            skill("fail", "Always fails."),
            skill("ask", "Always asks a question back."),
        ],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url),
            AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=url),
        ],
    )


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    agent_card = card(port)
    handler = DefaultRequestHandler(
        agent_executor=InteropExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    async def plain(_request):
        return PlainTextResponse("hello, this is no agent")

    routes = (
        create_agent_card_routes(agent_card=agent_card)
        + create_jsonrpc_routes(request_handler=handler, rpc_url=RPC_PATH, enable_v0_3_compat=True)
        + [Route("/plain", plain, methods=["GET", "POST"])]
    )
    config = uvicorn.Config(
        Starlette(routes=routes),
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
