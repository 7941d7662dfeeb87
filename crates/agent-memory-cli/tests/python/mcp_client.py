"""The official Python MCP SDK (`mcp`) as a client of the agent-memory MCP server.

Run by `tests/python_clients.rs` with the virtualenv's interpreter:

    python mcp_client.py stdio COMMAND [ARGS...]   # spawn the server in its stdio mode
    python mcp_client.py http URL                  # streamable HTTP; token in MCP_TOKEN

It lists the tools and calls every one of them (failing if the server offers a tool this
script does not know, or if one is left uncalled), checks each answer, reads a thread's
resource, and prints `mcp client ok: N tools called over TRANSPORT` last. Any failed check
raises, so the exit status is non-zero.
"""

import asyncio
import contextlib
import json
import os
import sys
import uuid

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# The tools the server must offer, and no others.
EXPECTED_TOOLS = {"remember", "recall", "search_memory", "list_threads", "forget"}


def check(condition, what, value=None):
    if not condition:
        detail = "" if value is None else f": {value!r}"
        raise AssertionError(f"{what}{detail}")


class Calls:
    """Calls tools through the client and records which were called."""

    def __init__(self, client):
        self.client = client
        self.called = set()

    async def ok(self, name, arguments):
        """Calls a tool that must succeed; returns its structured content."""
        result = await self.client.call_tool(name, arguments)
        self.called.add(name)
        check(not result.is_error, f"{name} failed", [c.model_dump() for c in result.content])
        data = result.structured_content
        check(isinstance(data, dict), f"{name} returned no structured content", result.model_dump())
        # The text content carries the same JSON.
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        check(texts and json.loads(texts[0]) == data, f"{name}: text and structured content differ", texts)
        return data

    async def error(self, name, arguments):
        """Calls a tool that must answer a tool error; returns the error's text."""
        result = await self.client.call_tool(name, arguments)
        self.called.add(name)
        check(result.is_error, f"{name} accepted invalid arguments", result.model_dump())
        text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        check(text.strip(), f"{name}: a tool error with no text")
        return text


async def exercise(client, transport):
    tools = await client.list_tools()
    names = {tool.name for tool in tools.tools}
    check(names == EXPECTED_TOOLS, "the server's tools", sorted(names))
    for tool in tools.tools:
        check(tool.description, f"tool {tool.name} has no description")
        check(tool.input_schema.get("type") == "object", f"tool {tool.name}'s input schema", tool.input_schema)

    calls = Calls(client)
    session = f"mcp-{transport}-{uuid.uuid4().hex[:12]}"
    turn = [
        {"id": f"{session}-u1", "role": "user", "text": "My favourite colour is teal."},
        {"id": f"{session}-a1", "role": "assistant", "text": "Noted: teal."},
    ]

    # remember: an atomic batch, idempotent by message id; and a fact.
    first = await calls.ok("remember", {"session": session, "messages": turn})
    check(first.get("inserted") == 2, "remember stored the batch", first)
    again = await calls.ok("remember", {"session": session, "messages": turn})
    check(again.get("inserted") == 0, "a retried batch is not stored twice", again)
    check(again.get("seqs") == first.get("seqs"), "a retried batch answers the same seqs", again)
    await calls.ok("remember", {"session": session, "fact": "The user lives in Lisbon."})
    problem = await calls.error("remember", {"session": session})
    check("messages" in problem and "fact" in problem, "remember's error names what is missing", problem)
    await calls.error("remember", {"session": "not a valid id!", "fact": "x"})

    # recall: the fact and the messages, within the budget.
    recalled = await calls.ok("recall", {"session": session, "max_tokens": 4000})
    context = json.dumps(recalled)
    check("teal" in context and "Lisbon" in context, "recall returns the messages and the fact", recalled)
    tiny = await calls.ok("recall", {"session": session, "max_tokens": 1})
    check("teal" not in json.dumps(tiny.get("messages", [])), "recall keeps to its budget", tiny)

    # search_memory: a case-insensitive match, newest first.
    found = await calls.ok("search_memory", {"session": session, "query": "TEAL"})
    matches = found.get("matches")
    check(isinstance(matches, list) and len(matches) == 2, "search finds both messages", found)
    check(all("teal" in json.dumps(m).lower() for m in matches), "every match holds the text", matches)
    nothing = await calls.ok("search_memory", {"session": session, "query": "aubergine"})
    check(nothing.get("matches") == [], "search finds nothing for an absent text", nothing)
    await calls.error("search_memory", {"session": session, "query": "teal", "limit": 0})

    # list_threads: the thread is listed.
    listed = await calls.ok("list_threads", {"limit": 1000})
    sessions = [item.get("session") for item in listed.get("items", [])]
    check(session in sessions, "list_threads lists the thread", listed)

    # The thread's history as a resource.
    templates = await client.list_resource_templates()
    uris = [t.uri_template for t in templates.resource_templates]
    check(any(u.startswith("thread://") for u in uris), "a thread:// resource template", uris)
    resource = await client.read_resource(f"thread://{session}")
    body = "".join(getattr(c, "text", "") for c in resource.contents)
    check("teal" in body, "the thread's resource holds its messages", body[:500])

    # forget: a dry run deletes nothing, then the real one empties the session.
    dry = await calls.ok("forget", {"session": session, "dry_run": True})
    check(dry.get("dry_run") is True and dry.get("total_items", 0) >= 2, "a dry run counts", dry)
    still = await calls.ok("recall", {"session": session})
    check("teal" in json.dumps(still), "a dry run deleted nothing", still)
    receipt = await calls.ok("forget", {"session": session})
    check(receipt.get("total_items") == dry.get("total_items"), "forget deletes what the dry run counted", receipt)
    gone = await calls.ok("search_memory", {"session": session, "query": "teal"})
    check(gone.get("matches") == [], "nothing is left after forget", gone)
    await calls.error("forget", {})

    # Every tool the server offers was called.
    check(calls.called == names, "every tool was called", sorted(names - calls.called))
    return len(calls.called)


async def main(argv):
    async with contextlib.AsyncExitStack() as stack:
        if len(argv) >= 2 and argv[0] == "stdio":
            server = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
            transport = "stdio"
        elif len(argv) == 2 and argv[0] == "http":
            headers = {}
            token = os.environ.get("MCP_TOKEN")
            if token:
                headers["Authorization"] = f"Bearer {token}"
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            server = streamable_http_client(argv[1], http_client=http)
            transport = "http"
        else:
            print(__doc__, file=sys.stderr)
            return 2
        # The handshake (`initialize`), as every MCP server of the 2025 protocol revisions
        # speaks it.
        client = await stack.enter_async_context(Client(server, mode="legacy", read_timeout_seconds=60))
        count = await exercise(client, transport)
    print(f"mcp client ok: {count} tools called over {transport}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
