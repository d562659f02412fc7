"""pad's MCP tools driven by the official MCP Python SDK, over stdio (`pad mcp`)
and streamable HTTP (`POST /mcp`). Run by crates/pad/tests/e2e/mcp.rs, which starts
the server and passes PAD_URL, PAD_TOKEN, PAD_VIEWER_TOKEN, PAD_BIN, PAD_HOME."""

import asyncio
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

URL = os.environ["PAD_URL"]
TOKEN = os.environ["PAD_TOKEN"]
VIEWER = os.environ["PAD_VIEWER_TOKEN"]
TOOLS = {
    "pad_item_list", "pad_item_show", "pad_item_create", "pad_item_update", "pad_item_comment",
    "pad_frontier", "pad_item_claim", "pad_item_renew", "pad_item_release", "pad_claim_next",
    "pad_item_complete", "pad_item_fail", "pad_prime", "pad_leases_renew",
}


def stdio():
    env = {"PAD_HOME": os.environ["PAD_HOME"], "PATH": os.environ.get("PATH", "")}
    return Client(StdioServerParameters(command=os.environ["PAD_BIN"], args=["mcp"], env=env))


def http(token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(f"{URL}/mcp", http_client=httpx2.AsyncClient(headers=headers)))


def ok(result):
    assert not result.is_error, f"tool error: {result.structured_content}"
    return result.structured_content


def err(result):
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    return result.structured_content["error"]


async def main():
    async with stdio() as a, http(TOKEN) as b:
        # Both transports introduce the server as pad, at pad's version (not the MCP library's).
        for client in (a, b):
            info = client.server_info
            assert info is not None and info.name == "pad", info
            assert info.version == os.environ["PAD_VERSION"], info
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert set(tools) == TOOLS, sorted(tools)
        claim = tools["pad_item_claim"].input_schema
        assert "ref" in claim["required"], claim
        for prop in ("holder", "session_id", "ttl_seconds", "note"):
            assert prop in claim["properties"], (prop, claim)
        assert "lease_held" in tools["pad_item_claim"].description
        # A lease is named by epoch, lease_id or both (docs/leases.md, L17): neither is required alone.
        renew = tools["pad_item_renew"].input_schema
        assert "ref" in renew["required"] and {"epoch", "lease_id"} <= set(renew["properties"]), renew
        assert not {"epoch", "lease_id"} & set(renew.get("required", [])), renew
        assert set(tools["pad_item_update"].input_schema["properties"]["status"]["enum"]) >= {"open", "done"}
        http_tools = {t.name for t in (await b.list_tools()).tools}
        assert http_tools == TOOLS, sorted(http_tools)

        item = ok(await a.call_tool("pad_item_create", {"title": "Port the parser", "priority": "low"}))
        ref = item["ref"]
        assert ref == "TASK-1", item

        won = ok(await a.call_tool("pad_item_claim", {"ref": ref, "holder": "agent-a", "ttl_seconds": 120}))
        assert won["lease"]["holder"] == "agent-a" and won["lease"]["epoch"] == 1, won

        held = err(await b.call_tool("pad_item_claim", {"ref": ref, "holder": "agent-b"}))
        assert held["code"] == "lease_held", held
        assert held["details"]["holder"] == "agent-a", held
        assert "agent-a" in held["message"], held

        renewed = ok(await a.call_tool("pad_item_renew", {"ref": ref, "epoch": 1, "holder": "agent-a", "ttl_seconds": 300}))
        assert renewed["lease"]["ttl_seconds"] == 300, renewed
        by_id = {"ref": ref, "lease_id": won["lease"]["lease_id"], "holder": "agent-a", "ttl_seconds": 300}
        assert ok(await a.call_tool("pad_item_renew", by_id))["lease"]["epoch"] == 1
        lost = err(await a.call_tool("pad_item_renew", {"ref": ref, "epoch": 7, "holder": "agent-a"}))
        assert lost["code"] == "lease_lost", lost
        # One heartbeat for many leases: each answered on its own.
        many = ok(await a.call_tool("pad_leases_renew", {"holder": "agent-a", "leases": [
            {"ref": ref, "epoch": 1, "ttl_seconds": 300}, {"ref": ref, "epoch": 7}]}))
        assert many["results"][0]["lease"]["ttl_seconds"] == 300, many
        assert many["results"][1]["error"]["code"] == "lease_lost", many

        shown = ok(await b.call_tool("pad_item_show", {"ref": ref.lower()}))
        assert shown["lease"]["holder"] == "agent-a", shown

        done = ok(await a.call_tool("pad_item_update", {"ref": ref, "status": "in-progress", "lease_epoch": 1}))
        assert done["status"] == "in-progress", done
        ok(await a.call_tool("pad_item_comment", {"ref": ref, "body": "halfway"}))

        released = ok(await a.call_tool("pad_item_release", {"ref": ref, "holder": "agent-a"}))
        assert released["released"] is True, released
        again = ok(await a.call_tool("pad_item_release", {"ref": ref, "holder": "agent-a"}))
        assert again["released"] is False, again

        ok(await b.call_tool("pad_item_create", {"title": "Fix the outage", "priority": "critical"}))
        ok(await b.call_tool("pad_item_create", {"title": "Needs a person", "priority": "critical", "labels": ["needs-human"]}))
        frontier = ok(await b.call_tool("pad_frontier", {"autonomous": True}))
        assert [i["ref"] for i in frontier["items"]][:1] == ["TASK-2"], frontier
        nxt = ok(await b.call_tool("pad_claim_next", {"holder": "agent-b", "autonomous": True}))
        assert nxt["item"]["ref"] == "TASK-2" and nxt["lease"]["holder"] == "agent-b", nxt
        listed = ok(await a.call_tool("pad_item_list", {"leased": True}))
        assert [i["ref"] for i in listed["items"]] == ["TASK-2"], listed

        bad = err(await a.call_tool("pad_item_claim", {"ref": "TASK-1", "ttl_seconds": 0}))
        assert bad["code"] == "invalid_ttl", bad

        # Batch verbs: a bad count or wait claims nothing; count claims several, each its own lease.
        ok(await a.call_tool("pad_item_create", {"title": "Batch one"}))
        ok(await a.call_tool("pad_item_create", {"title": "Batch two"}))
        for bad in ({"count": 0}, {"count": 33}, {"count": -1}, {"wait_seconds": 31}, {"wait_seconds": -1}):
            refused = err(await a.call_tool("pad_claim_next", {"holder": "agent-c", **bad}))
            assert refused["code"] == "validation_failed", (bad, refused)
        # Not a whole number: the API's refusal too, naming the field, not the SDK's or the library's.
        for bad in ({"count": 1.5}, {"wait": "30s"}):
            refused = err(await a.call_tool("pad_claim_next", {"holder": "agent-c", **bad}))
            assert (refused["code"], refused["details"]["field"]) == ("validation_failed", *bad), (bad, refused)
        listed = ok(await a.call_tool("pad_item_list", {"leased": True}))
        assert [i["ref"] for i in listed["items"]] == ["TASK-2"], ("a refused batch claimed", listed)
        two = ok(await a.call_tool("pad_claim_next", {"holder": "agent-c", "count": 2}))
        grants = two["grants"]
        assert len(grants) == 2 and grants[0]["item"]["ref"] != grants[1]["item"]["ref"], two
        assert {g["lease"]["holder"] for g in grants} == {"agent-c"}, two
        assert grants[0]["lease"]["lease_id"] != grants[1]["lease"]["lease_id"], two

    # Over HTTP, no token is a 401 before any MCP happens.
    async with httpx2.AsyncClient() as raw:
        r = await raw.post(f"{URL}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                           headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 401, (r.status_code, r.text)
        assert r.json()["error"]["code"] == "unauthorized", r.text

    # A viewer may read but not claim.
    async with http(VIEWER) as v:
        ok(await v.call_tool("pad_item_show", {"ref": "TASK-1"}))
        refused = err(await v.call_tool("pad_item_claim", {"ref": "TASK-1", "holder": "viewer"}))
        assert refused["code"] == "forbidden", refused

    print("mcp: 1 passed, 0 failed")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"mcp: assertion failed: {e}", file=sys.stderr)
        raise
