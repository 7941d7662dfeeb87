#!/usr/bin/env python3
"""Use the agent-memory server's HTTP API from a plain Python script (standard library only).

Start a server first (`agent-memory serve`, see docs/server.md), then:

    AGENT_MEMORY_SERVER=http://127.0.0.1:8080 AGENT_MEMORY_TOKEN=... python3 http_api.py

The script appends a conversation to a thread (twice, to show that message ids make retries
idempotent), reads the thread's last messages and its counts, saves a session with optimistic
concurrency (a stale `If-Match` is refused with 412), lists the threads, then forgets the
session's data and checks that the thread is empty. It exits non-zero on any surprise.

Environment:
    AGENT_MEMORY_SERVER   the server's base URL (default http://127.0.0.1:8080)
    AGENT_MEMORY_TOKEN    a bearer token from the server's configuration (none: no header)
    AGENT_MEMORY_SESSION  the session id to use (default: a fresh one)
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid

BASE = os.environ.get("AGENT_MEMORY_SERVER", "http://127.0.0.1:8080").rstrip("/")
TOKEN = os.environ.get("AGENT_MEMORY_TOKEN", "")
SESSION = os.environ.get("AGENT_MEMORY_SESSION") or f"py-example-{uuid.uuid4().hex[:12]}"


class ApiError(Exception):
    """An error answer: the HTTP status and the problem document (RFC 9457)."""

    def __init__(self, status, problem):
        super().__init__(f"HTTP {status}: {problem.get('detail', problem)}")
        self.status = status
        self.problem = problem


def call(method, path, body=None, query=None, headers=None):
    """Sends one request; returns (parsed JSON body, response headers) or raises ApiError."""
    url = BASE + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None
    request_headers = {"Accept": "application/json"}
    if TOKEN:
        request_headers["Authorization"] = f"Bearer {TOKEN}"
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        request_headers["Content-Type"] = "application/json"
    request_headers.update(headers or {})
    request = urllib.request.Request(url, data=data, method=method, headers=request_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return (json.loads(raw) if raw else None), response.headers
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            problem = json.loads(raw)
        except ValueError:
            problem = {"detail": raw.decode("utf-8", "replace")}
        raise ApiError(err.code, problem) from None


def thread(suffix=""):
    return f"/v1/threads/{urllib.parse.quote(SESSION, safe='')}{suffix}"


def main():
    health, _ = call("GET", "/healthz")
    print(f"server: {health}")

    # 1. Append a turn. The ids make the append idempotent: sending it again stores nothing.
    turn = [
        {"id": f"{SESSION}-u1", "role": "user", "text": "My favourite colour is teal."},
        {"id": f"{SESSION}-a1", "role": "assistant", "text": "Noted: teal."},
    ]
    first, _ = call("POST", thread("/messages"), {"messages": turn})
    again, _ = call("POST", thread("/messages"), {"messages": turn})
    print(f"appended: {first['inserted']} new, seqs {first['seqs']}; retried: {again['inserted']} new")
    assert first["inserted"] == 2, first
    assert again["inserted"] == 0 and again["seqs"] == first["seqs"], again

    more = [{"id": f"{SESSION}-u2", "role": "user", "text": "What is my favourite colour?"}]
    call("POST", thread("/messages"), {"messages": more})

    # 2. Read the window: the last two messages, and the counts.
    window, _ = call("GET", thread("/messages"), query={"last": 2})
    texts = [m["message"] for m in window["messages"]]
    print(f"last 2: seqs {[m['seq'] for m in window['messages']]}")
    assert [m["seq"] for m in window["messages"]] == [2, 3], window
    assert "teal" in json.dumps(texts[0]), texts
    counts, _ = call("GET", thread("/count"))
    print(f"count: {counts['active']} active, {counts['active_tokens']} tokens, last seq {counts['last_seq']}")
    assert counts["active"] == 3 and counts["last_seq"] == 3, counts

    # 3. A session's state, saved with optimistic concurrency.
    saved, headers = call("PUT", f"/v1/sessions/{SESSION}", {"state": {"step": 1}})
    version = saved["version"]
    print(f"session saved: version {version} (ETag {headers.get('ETag')})")
    updated, _ = call(
        "PUT", f"/v1/sessions/{SESSION}", {"state": {"step": 2}}, headers={"If-Match": f'"{version}"'}
    )
    try:
        call("PUT", f"/v1/sessions/{SESSION}", {"state": {"step": 3}}, headers={"If-Match": f'"{version}"'})
        raise AssertionError("a stale If-Match was accepted")
    except ApiError as err:
        print(f"stale write refused: {err.status} {err.problem.get('kind')}")
        assert err.status == 412, err.problem
    loaded, _ = call("GET", f"/v1/sessions/{SESSION}")
    assert loaded["state"] == {"step": 2} and loaded["version"] == updated["version"], loaded

    # 4. The caller's threads (one page).
    page, _ = call("GET", "/v1/threads", query={"limit": 1000})
    sessions = [item["session"] for item in page["items"]]
    print(f"threads: {len(sessions)} on this page")
    assert SESSION in sessions, sessions

    # 5. Forget everything of this session: first a dry run, then for real.
    dry, _ = call("POST", "/v1/forget", {"session": SESSION, "dry_run": True})
    print(f"forget (dry run): {dry['total_items']} items")
    receipt, _ = call("POST", "/v1/forget", {"session": SESSION})
    print(f"forgot: {receipt['total_items']} items")
    assert receipt["total_items"] >= 3, receipt
    after, _ = call("GET", thread("/count"))
    assert after["active"] == 0, after
    print("ok")


if __name__ == "__main__":
    try:
        main()
    except (ApiError, AssertionError, urllib.error.URLError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
