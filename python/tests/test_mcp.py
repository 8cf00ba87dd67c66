"""`xlens mcp` through the official MCP Python SDK: each tool's result is the CLI's `--json`.

A real client (`mcp.client.stdio.stdio_client` + `mcp.ClientSession`) starts
`xlens mcp --root <testdata>` over stdio, lists the tools, calls each on testdata profiles and
compares the result with `xlens <command> --json` for the same arguments (pages of a result over
64 KiB with the same page of the CLI's document); then checks that a path outside the root, a
symlink that leads out, a URL and malformed arguments are refused as tool errors while the server
goes on answering.

Needs the `xlens` binary built (`cargo test --workspace` builds it) or `XLENS_BIN` naming it;
fails, not skips, without it. Skips when the `mcp` package is not installed (CI installs it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile

import pytest

mcp = pytest.importorskip("mcp", reason="the `mcp` package is not installed (pip install mcp; CI installs it)")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.realpath(os.path.join(ROOT, "testdata"))
TOOLS = {
    "scan",
    "findings",
    "ops",
    "hlo",
    "inventory",
    "kernels",
    "roofline",
    "diff",
    "graph",
    "events",
    "device",
    "memory",
}
CPU = os.path.join(TESTDATA, "corpus", "recompilation")
BASELINE = os.path.join(TESTDATA, "corpus", "data_formatting_baseline")
CHANGED = os.path.join(TESTDATA, "corpus", "data_formatting")
GPU = os.path.join(TESTDATA, "h200", "h200_small_launch_bound")
# A capture with a runtime memory profile on several allocators.
MEMORY = os.path.join(TESTDATA, "field", "amd_jax08_gemm")


def xlens_bin() -> str:
    exe = os.environ.get("XLENS_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "xlens"
    )
    if not os.path.exists(exe):
        pytest.fail(f"{exe} is not built: run `cargo build` (or set XLENS_BIN)")
    return exe


def cli(*args: str) -> object:
    """`xlens ARGS --json`, run in an empty directory (no xlens.toml), as JSON."""
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([xlens_bin(), *args, "--json"], check=True, capture_output=True, text=True, cwd=cwd)
    return json.loads(out.stdout)


def cut(value: object, offset: int, limit: int) -> object:
    """The page of `value` the server gives for `offset` and `limit` (src/cli/mcp/page.rs):
    every list longer than `limit` cut to its rows offset..offset+limit, at any depth."""
    if isinstance(value, list):
        rows = value[offset : offset + limit] if len(value) > limit else value
        return [cut(r, offset, limit) for r in rows]
    if isinstance(value, dict):
        return {k: cut(v, offset, limit) for k, v in value.items()}
    return value


def same_as_cli(result: dict, expected: object) -> None:
    """`result` is `expected`, or the page of it that `result` says it is."""
    if isinstance(result, dict) and "page" in result and "truncated" in result:
        page = result["page"]
        paged = cut(expected, page["offset"], page["limit"])
        body = {k: v for k, v in result.items() if k not in ("page", "truncated")}
        if not isinstance(paged, dict):
            body = body["result"]
        assert body == paged
        assert result["truncated"] is True
        assert page["lists"], "a truncated result names the lists it cut"
    else:
        assert result == expected


def field(obj: object, name: str, old_name: str) -> object:
    """A field of the SDK's types: snake_case since mcp 2, camelCase before."""
    return getattr(obj, name) if hasattr(obj, name) else getattr(obj, old_name)


async def call(session: ClientSession, tool: str, args: dict) -> tuple[bool, object]:
    result = await session.call_tool(tool, args)
    assert len(result.content) == 1
    text = result.content[0].text
    assert len(text.encode()) <= 64 * 1024, f"{tool}: {len(text)} bytes"
    if field(result, "is_error", "isError"):
        assert "\n" not in text, f"a tool error is one line: {text!r}"
        return False, text
    return True, json.loads(text)


async def ok(session: ClientSession, tool: str, args: dict) -> object:
    good, value = await call(session, tool, args)
    assert good, f"{tool} {args}: {value}"
    return value


async def refused(session: ClientSession, tool: str, args: dict, why: str) -> None:
    good, value = await call(session, tool, args)
    assert not good, f"{tool} {args} was answered: {str(value)[:200]}"
    assert why in value, f"{tool} {args}: {value!r} does not say {why!r}"


def run_session(body, root: str = TESTDATA, extra: tuple[str, ...] = ()) -> None:
    async def main() -> None:
        params = StdioServerParameters(command=xlens_bin(), args=["mcp", "--root", root, *extra], cwd=root)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                # A server that stops answering fails the test instead of hanging CI.
                await asyncio.wait_for(body(session), timeout=900)

    asyncio.run(main())


def test_tools_are_listed_with_schemas_and_descriptions() -> None:
    async def body(session: ClientSession) -> None:
        tools = (await session.list_tools()).tools
        assert {t.name for t in tools} >= TOOLS
        for t in tools:
            assert t.description and len(t.description) > 80, t.name
            schema = field(t, "input_schema", "inputSchema")
            assert schema["type"] == "object"
            assert {"offset", "limit"} <= set(schema["properties"]), t.name
        path_tools = {t.name for t in tools if "path" in field(t, "input_schema", "inputSchema").get("required", [])}
        assert path_tools >= {"scan", "findings", "ops", "hlo", "inventory", "kernels", "events", "device", "memory"}

    run_session(body)


def test_each_tool_is_its_cli_json() -> None:
    async def body(session: ClientSession) -> None:
        for path in (CPU, GPU):
            same_as_cli(await ok(session, "scan", {"path": path}), cli("scan", path))
            same_as_cli(await ok(session, "ops", {"path": path}), cli("ops", path))
            same_as_cli(await ok(session, "hlo", {"path": path}), cli("hlo", path))
            same_as_cli(await ok(session, "inventory", {"path": path}), cli("inventory", path))
        # Relative paths are taken from the root.
        rel = os.path.relpath(CPU, TESTDATA)
        same_as_cli(await ok(session, "ops", {"path": rel}), cli("ops", CPU))
        same_as_cli(
            await ok(session, "scan", {"path": CPU, "only": ["recompilation"], "steps": "2.."}),
            cli("scan", CPU, "--only", "recompilation", "--steps", "2.."),
        )
        same_as_cli(await ok(session, "kernels", {"path": GPU}), cli("kernels", GPU))
        same_as_cli(await ok(session, "kernels", {"path": GPU, "top": 3}), cli("kernels", GPU, "--top", "3"))
        # The graph around an instruction, and HLO text (recompilation has the op in two programs).
        same_as_cli(
            await ok(session, "graph", {"path": CPU, "op": "dot.32", "program": "jit_train_step(36)"}),
            cli("graph", CPU, "--op", "dot.32", "--program", "jit_train_step(36)"),
        )
        same_as_cli(
            await ok(session, "graph", {"path": GPU, "op": "gemm_fusion_dot.16", "hops": 3, "max_nodes": 20}),
            cli("graph", GPU, "--op", "gemm_fusion_dot.16", "--hops", "3", "--max-nodes", "20"),
        )
        same_as_cli(
            await ok(session, "graph", {"path": CPU, "program": "jit_train_step(38)", "text": True}),
            cli("graph", CPU, "--program", "jit_train_step(38)", "--text"),
        )
        same_as_cli(
            await ok(session, "graph", {"path": GPU, "program": "jit_step", "summary": True}),
            cli("graph", GPU, "--program", "jit_step", "--summary"),
        )
        await refused(session, "graph", {"path": CPU, "op": "dot.32"}, "pick one with --program")
        same_as_cli(await ok(session, "roofline", {}), cli("roofline"))
        same_as_cli(
            await ok(session, "roofline", {"chips": ["TPU v5e", "H100 SXM"]}),
            cli("roofline", "--chip", "TPU v5e", "--chip", "H100 SXM"),
        )
        same_as_cli(await ok(session, "diff", {"base": BASELINE, "new": CHANGED}), cli("diff", BASELINE, CHANGED))
        same_as_cli(
            await ok(session, "diff", {"base": CPU, "new": CPU, "min_change": 5}),
            cli("diff", CPU, CPU, "--min-change", "5"),
        )
        # events: aggregates, grouped by line, a window, a list and the lines, as `xlens events`.
        same_as_cli(await ok(session, "events", {"path": CPU}), cli("events", CPU))
        same_as_cli(
            await ok(session, "events", {"path": CPU, "pattern": "^train$", "top": 3}),
            cli("events", CPU, "--pattern", "^train$", "--top", "3"),
        )
        same_as_cli(
            await ok(session, "events", {"path": GPU, "group_by": "line", "plane": "^/device:GPU"}),
            cli("events", GPU, "--group-by", "line", "--plane", "^/device:GPU"),
        )
        same_as_cli(
            await ok(session, "events", {"path": CPU, "from_ms": 1.5, "to_ms": 40, "line": "python"}),
            cli("events", CPU, "--from-ms", "1.5", "--to-ms", "40", "--line", "python"),
        )
        same_as_cli(
            await ok(session, "events", {"path": CPU, "list": True, "pattern": "^train$", "top": 5}),
            cli("events", CPU, "--list", "--pattern", "^train$", "--top", "5"),
        )
        same_as_cli(await ok(session, "events", {"path": GPU, "lines": True}), cli("events", GPU, "--lines"))
        await refused(session, "events", {"path": CPU, "lines": True, "top": 2}, "lines")
        await refused(session, "events", {"path": CPU, "pattern": "("}, "pattern")
        # device and memory, with and without a runtime memory profile.
        for path in (CPU, GPU, MEMORY):
            same_as_cli(await ok(session, "device", {"path": path}), cli("device", path))
            same_as_cli(await ok(session, "memory", {"path": path}), cli("memory", path))
        same_as_cli(await ok(session, "memory", {"path": MEMORY, "top": 1}), cli("memory", MEMORY, "--top", "1"))
        memory = await ok(session, "memory", {"path": MEMORY})
        assert memory["memory_profile"]["hosts"][0]["peak_memory_id"] == "GPU_0_bfc"
        none = (await ok(session, "memory", {"path": CPU}))["memory_profile"]["hosts"][0]
        assert none["peak_memory_id"] is None and none["reason"]
        # One finding's full evidence is the scan's finding.
        report = cli("scan", CPU)
        first = report["findings"][0]["id"]
        found = await ok(session, "findings", {"path": CPU, "id": first})
        assert found["findings"] == [f for f in report["findings"] if f["id"] == first]
        await refused(session, "findings", {"path": CPU, "id": "no_such_finding"}, first)

    run_session(body)


def test_large_results_are_paged() -> None:
    async def body(session: ClientSession) -> None:
        expected = cli("ops", GPU)
        first = await ok(session, "ops", {"path": GPU, "limit": 2})
        assert first["truncated"] is True and first["page"]["limit"] == 2
        same_as_cli(first, expected)
        second = await ok(session, "ops", {"path": GPU, "offset": first["page"]["next_offset"], "limit": 2})
        same_as_cli(second, expected)
        assert second["page"]["offset"] == 2

    run_session(body)


def test_refusals_are_tool_errors_and_the_server_keeps_serving() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        outside = os.path.join(tmp, "outside")
        os.makedirs(root)
        os.makedirs(outside)
        secret = os.path.join(outside, "secret.xplane.pb")
        with open(os.path.join(CPU, sorted(f for f in os.listdir(CPU) if f.endswith(".xplane.pb"))[0]), "rb") as f:
            data = f.read()
        with open(secret, "wb") as f:
            f.write(data)
        with open(os.path.join(root, "inside.xplane.pb"), "wb") as f:
            f.write(data)
        os.symlink(secret, os.path.join(root, "escape.xplane.pb"))
        os.symlink(outside, os.path.join(root, "escape_dir"))
        os.makedirs(os.path.join(root, "run"))
        os.symlink(secret, os.path.join(root, "run", "host.xplane.pb"))

        async def body(session: ClientSession) -> None:
            await refused(session, "scan", {"path": secret}, "outside the server's --root")
            await refused(session, "ops", {"path": "../outside/secret.xplane.pb"}, "outside the server's --root")
            await refused(session, "scan", {"path": "escape.xplane.pb"}, "outside the server's --root")
            await refused(session, "hlo", {"path": "escape_dir"}, "outside the server's --root")
            # A run directory under the root whose host file is a symlink that leads out.
            await refused(session, "scan", {"path": "run"}, "outside the server's --root")
            await refused(session, "scan", {"path": "https://example.com/p.xplane.pb"}, "is a URL")
            await refused(session, "scan", {"path": "s3://bucket/run"}, "is a URL")
            await refused(session, "diff", {"base": "inside.xplane.pb", "new": secret}, "outside")
            # Malformed arguments: missing, unknown, of the wrong type, out of range.
            await refused(session, "scan", {}, "path")
            await refused(session, "scan", {"path": "inside.xplane.pb", "bogus": 1}, "bogus")
            await refused(session, "kernels", {"path": "inside.xplane.pb", "top": "ten"}, "top")
            await refused(session, "ops", {"path": "inside.xplane.pb", "offset": -1}, "offset")
            await refused(session, "scan", {"path": "inside.xplane.pb", "only": ["nope"]}, "nope")
            await refused(session, "scan", {"path": "inside.xplane.pb", "steps": "9..2"}, "steps")
            await refused(session, "roofline", {"chips": ["no such chip"]}, "no such chip")
            await refused(session, "scan", {"path": "missing.xplane.pb"}, "missing.xplane.pb")
            await refused(session, "no_such_tool", {}, "no tool")
            await refused(session, "graph", {"path": "inside.xplane.pb", "op": "no_such_op.1"}, "no_such_op.1")
            await refused(session, "graph", {"path": "inside.xplane.pb", "op": "dot.32", "hops": 99}, "hops")
            await refused(session, "graph", {"path": "escape.xplane.pb", "op": "dot.32"}, "outside the server's --root")
            # Still serving, and reading what it may.
            inside = os.path.join(root, "inside.xplane.pb")
            same_as_cli(await ok(session, "scan", {"path": "inside.xplane.pb"}), cli("scan", inside))

        run_session(body, root=root)


def test_scan_writes_its_page_into_out_only() -> None:
    """With `--out DIR` a scan's `html` page lands in DIR (the page `xlens scan --html` writes);
    without it, or with a name that leaves DIR, the call is a tool error and nothing is written."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        outside = os.path.join(tmp, "outside")
        os.makedirs(outside)
        cli_page = os.path.join(tmp, "cli.html")
        expected = cli("scan", CPU, "--html", cli_page)
        with open(cli_page, encoding="utf-8") as f:
            page = f.read()

        async def without_out(session: ClientSession) -> None:
            await refused(session, "scan", {"path": CPU, "html": "page.html"}, "--out")
            # Still serving.
            same_as_cli(await ok(session, "scan", {"path": CPU}), expected)

        run_session(without_out)

        async def with_out(session: ClientSession) -> None:
            result = await ok(session, "scan", {"path": CPU, "html": "pages/cpu.html"})
            written = result.pop("html_page")
            assert written == os.path.join(os.path.realpath(out), "pages", "cpu.html")
            same_as_cli(result, expected)
            with open(written, encoding="utf-8") as f:
                assert f.read() == page
            for bad in ("../outside/page.html", os.path.join(outside, "page.html"), "a/../../page.html", "x/../.."):
                await refused(session, "scan", {"path": CPU, "html": bad}, "--out")
            os.symlink(outside, os.path.join(out, "away"))
            await refused(session, "scan", {"path": CPU, "html": "away/page.html"}, "leads outside")
            assert os.listdir(outside) == []
            # Still serving.
            same_as_cli(await ok(session, "ops", {"path": CPU}), cli("ops", CPU))

        run_session(with_out, extra=("--out", out))
        assert sorted(os.listdir(out)) == ["away", "pages"]
