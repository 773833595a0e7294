"""A stub OpenAI chat server that answers every request after a fixed delay (for overhead benchmarks).

    python benchmarks/gateway/_stub_upstream.py PORT DELAY_MS

Raw asyncio HTTP/1.1 with keep-alive, so the stub itself adds as little as possible to what is measured.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _httpload import read_body, read_framing

REPLY = json.dumps(
    {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1,
        "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "stub reply"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            await read_body(reader, *(await read_framing(reader)))  # chunked when a proxy may change the body
            await asyncio.sleep(delay_s)
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(REPLY)}\r\n\r\n"
            writer.write(head.encode() + REPLY)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def main(port: int, delay_ms: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, delay_ms / 1000), "127.0.0.1", port, backlog=1024)
    print(f"stub upstream on 127.0.0.1:{port}, {delay_ms} ms per reply", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
