"""Mem0's self-hosted REST API, backed by the real `mem0ai` library, for memory-mem0's tests.

Serves the routes of the mem0 repository's `server/main.py` ("Mem0 REST APIs", the OSS REST
server): `POST /memories` (body `MemoryCreate`: `messages`, `user_id`, `agent_id`, `run_id`,
`metadata`), `GET /memories?user_id=&agent_id=&run_id=`, `GET | PUT | DELETE
/memories/{memory_id}`, `GET /memories/{memory_id}/history`, `POST /search` (body
`SearchRequest`: `query`, `user_id`, `agent_id`, `run_id`, `filters`), `DELETE /memories?...`
and `POST /reset`, with FastAPI's status codes and `{"detail": ...}` error bodies. Each route
calls mem0's `Memory` as that server does; mem0ai 2.x takes the scoping ids of `search` and
`get_all` inside `filters` only, so they are moved there, as the 2.x server does.

`Memory` runs with its default in-process vector store (Qdrant's local mode, in a temporary
directory) and with its LLM and embedder set to provider "openai", pointed at a deterministic
OpenAI-compatible fake served by this same process: no key and no network. The fake answers
mem0's additive fact extraction with one memory per user message of the new messages, and
embeddings with words hashed into a fixed-size vector.

Usage: python server.py  (prints `port <N>` on stdout once both servers listen on 127.0.0.1;
stops on SIGTERM, SIGINT or when stdin closes).
"""

import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64
WORKDIR = tempfile.mkdtemp(prefix="agent-memory-mem0-")
# Before importing mem0: its home directory and no telemetry.
os.environ["MEM0_DIR"] = os.path.join(WORKDIR, "home")
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)

from mem0 import Memory  # noqa: E402  (after the environment above)

# ---------------------------------------------------------------------------------------------
# The OpenAI-compatible fake.


def embed(text):
    """Words hashed into DIMS buckets, L2-normalised: the same text gives the same vector."""
    vector = [0.0] * DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def extract(prompt):
    """mem0's additive extraction: the user lines of the `## New Messages` section, one memory
    each, in the `{"memory": [{"id", "text"}]}` shape mem0 parses."""
    match = re.search(r"## New Messages\n(.*?)\n\n## ", prompt, re.S)
    lines = match.group(1).splitlines() if match else []
    facts = [line[len("user: "):].strip() for line in lines if line.startswith("user: ")]
    return {"memory": [{"id": str(i), "text": fact} for i, fact in enumerate(facts) if fact]}


class OpenAiFake(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.endswith("/embeddings"):
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            answer = {
                "object": "list",
                "model": body.get("model", "fake"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": embed(text)}
                    for i, text in enumerate(inputs)
                ],
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        elif self.path.endswith("/chat/completions"):
            prompt = "\n".join(
                m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"
            )
            answer = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": json.dumps(extract(prompt))},
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        else:
            self.send_error(404)
            return
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# ---------------------------------------------------------------------------------------------
# The REST server.

IDS = ("user_id", "agent_id", "run_id")
MEMORY = None
LOCK = threading.Lock()  # Memory and Qdrant's local mode are used from one thread at a time.


class HttpError(Exception):
    def __init__(self, status, detail):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def invalid(loc, msg):
    """FastAPI's 422 answer to a body that does not validate."""
    return HttpError(422, [{"type": "value_error", "loc": loc, "msg": msg, "input": None}])


def optional_str(body, name):
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid(["body", name], "Input should be a valid string")
    return value


def memory_create(body):
    if not isinstance(body, dict):
        raise invalid(["body"], "Input should be a valid dictionary")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise invalid(["body", "messages"], "Field required")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
            m.get("content"), str
        ):
            raise invalid(["body", "messages", i], "role and content must be strings")
    params = {name: optional_str(body, name) for name in IDS}
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid(["body", "metadata"], "Input should be a valid dictionary")
    params["metadata"] = metadata
    messages = [{"role": m["role"], "content": m["content"]} for m in messages]
    return messages, {k: v for k, v in params.items() if v is not None}


def search_request(body):
    if not isinstance(body, dict):
        raise invalid(["body"], "Input should be a valid dictionary")
    query = body.get("query")
    if not isinstance(query, str):
        raise invalid(["body", "query"], "Field required")
    filters = body.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise invalid(["body", "filters"], "Input should be a valid dictionary")
    filters = dict(filters or {})
    for name in IDS:
        value = optional_str(body, name)
        if value is not None:
            filters[name] = value
    return query, filters


def id_query(query):
    params = {name: query[name][0] for name in IDS if query.get(name)}
    if not params:
        raise HttpError(400, "At least one identifier is required.")
    return params


def call(action, *args, **kwargs):
    try:
        with LOCK:
            return getattr(MEMORY, action)(*args, **kwargs)
    except Exception as error:  # The server answers 500 with the error's text.
        raise HttpError(500, str(error)) from error


class Rest(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            return json.loads(raw)
        except ValueError:
            raise invalid(["body"], "JSON decode error")

    def route(self, method):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        query = urllib.parse.parse_qs(url.query)
        if parts == ["memories"]:
            if method == "POST":
                messages, params = memory_create(self.body())
                if not any(params.get(name) for name in IDS):
                    raise HttpError(
                        400,
                        "At least one identifier (user_id, agent_id, run_id) is required.",
                    )
                return call("add", messages=messages, **params)
            if method == "GET":
                return call("get_all", filters=id_query(query))
            if method == "DELETE":
                call("delete_all", **id_query(query))
                return {"message": "All relevant memories deleted"}
        elif len(parts) == 2 and parts[0] == "memories":
            if method == "GET":
                return call("get", parts[1])
            if method == "PUT":
                update = self.body()
                if not isinstance(update, dict):
                    raise invalid(["body"], "Input should be a valid dictionary")
                return call(
                    "update", parts[1], text=update.get("text"), metadata=update.get("metadata")
                )
            if method == "DELETE":
                call("delete", parts[1])
                return {"message": "Memory deleted successfully"}
        elif len(parts) == 3 and parts[0] == "memories" and parts[2] == "history":
            if method == "GET":
                return call("history", parts[1])
        elif parts == ["search"]:
            if method == "POST":
                query_text, filters = search_request(self.body())
                return call("search", query_text, filters=filters)
        elif parts == ["reset"]:
            if method == "POST":
                call("reset")
                return {"message": "All memories reset"}
        else:
            raise HttpError(404, "Not Found")
        raise HttpError(405, "Method Not Allowed")

    def handle_method(self, method):
        try:
            self.answer(200, self.route(method))
        except HttpError as error:
            self.answer(error.status, {"detail": error.detail})

    def do_GET(self):
        self.handle_method("GET")

    def do_POST(self):
        self.handle_method("POST")

    def do_PUT(self):
        self.handle_method("PUT")

    def do_DELETE(self):
        self.handle_method("DELETE")


def serve(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def main():
    global MEMORY
    fake = ThreadingHTTPServer(("127.0.0.1", 0), OpenAiFake)
    serve(fake)
    fake_url = f"http://127.0.0.1:{fake.server_address[1]}/v1"
    MEMORY = Memory.from_config(
        {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "memories",
                    "path": os.path.join(WORKDIR, "qdrant"),
                    "embedding_model_dims": DIMS,
                    "on_disk": False,
                },
            },
            "llm": {
                "provider": "openai",
                "config": {
                    "model": "fake-llm",
                    "api_key": "not-a-key",
                    "openai_base_url": fake_url,
                    "temperature": 0.0,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": "fake-embedder",
                    "api_key": "not-a-key",
                    "openai_base_url": fake_url,
                    "embedding_dims": DIMS,
                },
            },
            "history_db_path": os.path.join(WORKDIR, "history.db"),
        }
    )
    rest = ThreadingHTTPServer(("127.0.0.1", 0), Rest)
    serve(rest)
    print(f"port {rest.server_address[1]}", flush=True)
    try:
        # The parent closes stdin (or dies) to stop us.
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    finally:
        rest.shutdown()
        fake.shutdown()
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
