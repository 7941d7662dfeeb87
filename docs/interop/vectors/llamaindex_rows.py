"""Captures what llama-index-core 0.14.25 itself writes to its SQL chat store, as test vectors.

Run (never in CI; the JSON beside it is committed) in a throwaway virtualenv with
`pip install llama-index-core==0.14.25 aiosqlite asyncpg`, and PostgreSQL on 127.0.0.1
(trust auth, database `test`). Writes llamaindex_rows.json next to this file: the `data` column LlamaIndex wrote for messages
with thinking, cache-point, tool-call and media blocks (SQLite), and the index names SQLAlchemy
gives a table in a PostgreSQL schema (`db_schema`), including names cut by its MD5 rule.
"""
import asyncio, json, os, sys, base64
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from llama_index.core.base.llms.types import (
    ChatMessage, MessageRole, TextBlock, ImageBlock, AudioBlock, VideoBlock, DocumentBlock,
    ThinkingBlock, CachePoint, CacheControl, ToolCallBlock,
)
import llama_index.core, sqlalchemy
from sqlalchemy import text

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

def messages():
    return [
        ("thinking_and_cache_point", ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            ThinkingBlock(content="The user wants the on-call rota; check the calendar first."),
            TextBlock(text="You are on call until Friday."),
            CachePoint(cache_control=CacheControl(type="ephemeral")),
        ])),
        ("tool_call_block", ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            TextBlock(text="Let me look that up."),
            ToolCallBlock(tool_call_id="call_1", tool_name="get_weather", tool_kwargs={"city": "Oslo"}),
        ])),
        ("image_url", ChatMessage(role=MessageRole.USER, blocks=[
            TextBlock(text="What is in this picture?"),
            ImageBlock(url="https://example.com/cat.png"),
        ])),
        ("image_data_url", ChatMessage(role=MessageRole.USER, blocks=[
            ImageBlock(url="data:image/png;base64," + base64.b64encode(PNG_1PX).decode()),
        ])),
        ("video_mp4", ChatMessage(role=MessageRole.USER, blocks=[
            VideoBlock(url="https://example.com/clip.mp4"),
        ])),
        ("audio_url", ChatMessage(role=MessageRole.USER, blocks=[
            AudioBlock(url="https://example.com/voice.wav"),
        ])),
        ("document_url", ChatMessage(role=MessageRole.USER, blocks=[
            DocumentBlock(url="https://example.com/report.pdf"),
        ])),
        ("plain_text", ChatMessage(role=MessageRole.USER, content="Hi, I am Dana.")),
    ]

async def rows_sqlite(path):
    store = SQLAlchemyChatStore(table_name="llama_rows", async_database_uri=f"sqlite+aiosqlite:///{path}")
    out = []
    for name, msg in messages():
        key = "vec-" + name
        await store.add_message(key, msg)
    async with store._async_engine.connect() as conn:
        res = await conn.execute(text('SELECT id, key, timestamp, role, status, data FROM llama_rows ORDER BY id'))
        for row in res:
            out.append({"name": row[1][len("vec-"):], "key": row[1], "role": row[3], "status": row[4], "data": row[5]})
    await store._async_engine.dispose()
    return out

async def pg_indexes(schema, table):
    uri = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    store = SQLAlchemyChatStore(table_name=table, async_database_uri=uri, db_schema=schema)
    await store.get_messages("x")  # creates schema, table and indexes
    async with store._async_engine.connect() as conn:
        res = await conn.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :s AND tablename = :t ORDER BY indexname"),
            {"s": schema, "t": table})
        names = [{"name": r[0], "definition": r[1]} for r in res]
    async with store._async_engine.begin() as conn:
        await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    await store._async_engine.dispose()
    return {"schema": schema, "table": table, "indexes": names}

async def main():
    here = os.path.dirname(os.path.abspath(__file__))
    db = os.path.join(here, "tmp-rows.db")
    if os.path.exists(db):
        os.remove(db)
    rows = await rows_sqlite(db)
    os.remove(db)
    idx = [
        await pg_indexes("li_vectors", "llama_index_memory"),
        await pg_indexes("li_vectors_schema", "t" * 40),
        await pg_indexes("s" * 30, "chat_" + "x" * 40),
    ]
    out = {
        "written_by": f"llama-index-core {llama_index.core.__version__}, SQLAlchemy {sqlalchemy.__version__}",
        "rows": [{k: v for k, v in r.items()} for r in rows],
        "postgres_schema_indexes": idx,
    }
    with open(os.path.join(here, "llamaindex_rows.json"), "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
        f.write("\n")

asyncio.run(main())
