"""The latency floor: the same request bodies needle sends, through a bare ``AsyncAnthropic`` with
N in flight. No haystack building, no scoring, no early stopping, no retries beyond the SDK's.

    python3 bench/floor_asyncio.py requests.json --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import anthropic


async def main(path: str, concurrency: int) -> int:
    with open(path, encoding="utf-8") as fh:
        bodies = json.load(fh)
    client = anthropic.AsyncAnthropic(
        base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"], max_retries=6
    )
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict) -> str:
        async with gate:
            message = await client.messages.create(**body)
        return "".join(b.text for b in message.content if b.type == "text")

    answers = await asyncio.gather(*(one(b) for b in bodies))
    await client.close()
    print(json.dumps({"calls": len(answers)}))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("requests")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    sys.exit(asyncio.run(main(args.requests, args.concurrency)))
