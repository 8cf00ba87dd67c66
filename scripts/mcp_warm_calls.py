#!/usr/bin/env python3
"""Cold and warm call latency of `xlens mcp` on one profile, through the official MCP client.

    python3 scripts/mcp_warm_calls.py XLENS_BIN PROFILE [REPEATS]

Starts `XLENS_BIN mcp --root <PROFILE's parent>`, calls each tool on PROFILE once (cold: the
profile is opened and the document computed) and then REPEATS times more (warm: the kept document
is paged; the scan's first call is the one that opens the profile), and prints a Markdown table of the cold time and the median and worst warm time, as
the client sees them (request to parsed response, stdio included). Needs `pip install mcp`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(exe: str, profile: str, repeats: int) -> None:
    profile = os.path.realpath(profile)
    params = StdioServerParameters(command=exe, args=["mcp", "--root", os.path.dirname(profile)])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def timed(tool: str, args: dict) -> tuple[float, dict]:
                start = time.perf_counter()
                result = await session.call_tool(tool, args)
                text = result.content[0].text
                elapsed = time.perf_counter() - start
                error = getattr(result, "is_error", None) or getattr(result, "isError", False)
                if error:
                    raise SystemExit(f"{tool}: {text}")
                return elapsed, json.loads(text)

            first_scan, report = await timed("scan", {"path": profile})
            ids = [f["id"] for f in report.get("findings", [])]
            calls = [("scan", {"path": profile})]
            if ids:
                calls.append(("findings", {"path": profile, "id": ids[0]}))
            calls += [
                ("ops", {"path": profile}),
                ("ops", {"path": profile, "offset": 100, "limit": 50}),
                ("hlo", {"path": profile}),
                ("inventory", {"path": profile}),
                ("kernels", {"path": profile}),
            ]
            print("| call | cold (first call) | warm median | warm max | result |")
            print("|---|---:|---:|---:|---:|")
            for tool, args in calls:
                cold, doc = await timed(tool, args)
                if tool == "scan" and not args.keys() - {"path"}:
                    cold = first_scan
                warm = [(await timed(tool, args))[0] for _ in range(repeats)]
                shown = {k: v for k, v in args.items() if k != "path"}
                size = len(json.dumps(doc, separators=(",", ":")))
                truncated = " (paged)" if doc.get("truncated") else ""
                print(
                    f"| `{tool}` {json.dumps(shown) if shown else ''} | {cold * 1e3:.0f} ms | "
                    f"{statistics.median(warm) * 1e3:.1f} ms | {max(warm) * 1e3:.1f} ms | "
                    f"{size / 1024:.0f} KiB{truncated} |"
                )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10))
