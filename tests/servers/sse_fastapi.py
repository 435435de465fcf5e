"""sse_fastapi.py - a streaming chat-completions app for uvicorn (FastAPI):
CHUNKS chunks (default 8) as a StreamingResponse, then "data: [DONE]".
Run: python3 -m uvicorn --app-dir tests/servers sse_fastapi:app --port PORT."""
import asyncio
import json
import os

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

app = FastAPI()
CHUNKS = int(os.environ.get("CHUNKS", "8"))


def chunk(i, finish):
    delta = {} if finish else {"content": f"tok{i} "}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if finish else None}]}
    return "data: " + json.dumps(body) + "\n\n"


@app.post("/v1/chat/completions")
async def chat(request: Request):
    await request.body()

    async def events():
        for i in range(CHUNKS + 1):
            yield chunk(i, i == CHUNKS)
            await asyncio.sleep(0.002)
        yield "data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream")
