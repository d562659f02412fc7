"""pad wired into Claude Code by `pad setup claude`, driven as Claude Code would drive it: the
MCP server is started from the command and args in the project's written .mcp.json, by the
official MCP Python SDK. Two sessions of one user, neither naming a holder, race for one item
over stdio and over HTTP: exactly one wins each time. Run by crates/pad/tests/e2e/agents.rs, which
starts the server and passes PAD_URL, PAD_TOKEN, PAD_HOME, PAD_PROJECT and a PATH with `pad`."""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

URL = os.environ["PAD_URL"]
TOKEN = os.environ["PAD_TOKEN"]
PROJECT = os.environ["PAD_PROJECT"]


def from_written_config():
    with open(os.path.join(PROJECT, ".mcp.json")) as f:
        entry = json.load(f)["mcpServers"]["pad"]
    assert entry.get("type", "stdio") == "stdio", entry
    env = {"PAD_HOME": os.environ["PAD_HOME"], "PATH": os.environ["PATH"]}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=PROJECT)
    return Client(params)


def http():
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    return Client(streamable_http_client(f"{URL}/mcp", http_client=client))


def ok(result):
    assert not result.is_error, f"tool error: {result.structured_content}"
    return result.structured_content


def err(result):
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    return result.structured_content["error"]


async def race(a, b, tool, args):
    """Both sessions call at once; returns (winner session, its answer, loser session, its error)."""
    ra, rb = await asyncio.gather(a.call_tool(tool, args), b.call_tool(tool, args))
    winners = [r for r in (ra, rb) if not r.is_error]
    assert len(winners) == 1, f"{len(winners)} winners: {ra.structured_content} {rb.structured_content}"
    if winners[0] is ra:
        return a, ok(ra), b, err(rb)
    return b, ok(rb), a, err(ra)


async def stdio_sessions():
    async with from_written_config() as a, from_written_config() as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        for name in ("pad_prime", "pad_claim_next", "pad_item_claim", "pad_item_renew", "pad_item_complete",
                     "pad_item_fail", "pad_item_release", "pad_item_comment", "pad_item_create"):
            assert name in tools, sorted(tools)
        for name in ("pad_prime", "pad_item_list", "pad_item_show", "pad_frontier"):
            assert tools[name].annotations.read_only_hint is True, (name, tools[name].annotations)
        for name in ("pad_item_release", "pad_item_complete", "pad_item_fail", "pad_item_update"):
            assert tools[name].annotations.destructive_hint is True, (name, tools[name].annotations)
        assert tools["pad_item_create"].annotations.read_only_hint is False

        ref = ok(await a.call_tool("pad_item_create", {"title": "Port the parser", "priority": "high"}))["ref"]
        winner, won, loser, held = await race(a, b, "pad_item_claim", {"ref": ref, "ttl_seconds": 600})
        holder, epoch = won["lease"]["holder"], won["lease"]["epoch"]
        assert holder.startswith("claude@"), holder
        assert held["code"] == "lease_held" and held["details"]["holder"] == holder, held
        assert "Next:" in held["message"] and "pad_claim_next" in held["message"], held

        # The winner's own session refreshes its claim; the loser cannot release it.
        again = ok(await winner.call_tool("pad_item_claim", {"ref": ref}))
        assert again["refreshed"] is True and again["lease"]["epoch"] == epoch, again
        refused = err(await loser.call_tool("pad_item_release", {"ref": ref}))
        assert refused["code"] == "lease_held", refused
        renewed = ok(await winner.call_tool("pad_item_renew", {"ref": ref, "epoch": epoch}))
        assert renewed["lease"]["holder"] == holder, renewed

        # claim-next from both sessions at once over one ready item: one gets it.
        ok(await a.call_tool("pad_item_create", {"title": "Write the docs"}))
        ca, cb = await asyncio.gather(
            a.call_tool("pad_claim_next", {"autonomous": True}), b.call_tool("pad_claim_next", {"autonomous": True}))
        got = [ok(r)["item"] for r in (ca, cb)]
        assert sorted(i is None for i in got) == [False, True], got

        # The brief, as a tool and as a prompt, names this session's lease.
        prime = await winner.call_tool("pad_prime", {})
        brief = ok(prime)
        assert brief["holder"] == holder, brief
        assert ref in [l["ref"] for l in brief["leases"]], brief
        assert ref in prime.content[0].text and holder in prime.content[0].text, prime.content[0].text
        prompts = [p.name for p in (await winner.list_prompts()).prompts]
        assert prompts == ["pad_prime"], prompts
        prompt = await winner.get_prompt("pad_prime")
        assert ref in prompt.messages[0].content.text, prompt.messages[0].content.text

        done = ok(await winner.call_tool("pad_item_complete", {"ref": ref, "epoch": epoch}))
        assert done["item"]["status"] == "done" and "lease" not in done["item"], done
        lost = err(await winner.call_tool("pad_item_complete", {"ref": ref, "epoch": epoch}))
        assert lost["code"] == "lease_lost" and "stop working" in lost["message"], lost

        # The session that took the second item gives up on it: the failure is counted, the note kept.
        taker, taken = (a, ok(ca)) if ok(ca)["item"] is not None else (b, ok(cb))
        failed = ok(await taker.call_tool("pad_item_fail", {
            "ref": taken["item"]["ref"], "epoch": taken["lease"]["epoch"], "note": "tests hang"}))
        assert failed["item"]["failures"] == 1 and "lease" not in failed["item"], failed
        assert failed["item"]["last_failure_note"] == "tests hang", failed


async def http_sessions():
    async with http() as h1, http() as h2:
        ref = ok(await h1.call_tool("pad_item_create", {"title": "Over HTTP"}))["ref"]
        winner, won, _, held = await race(h1, h2, "pad_item_claim", {"ref": ref})
        holder, epoch = won["lease"]["holder"], won["lease"]["epoch"]
        assert held["code"] == "lease_held", held
        assert holder != "owner@localhost", holder
        # HTTP keeps no session: renewing needs the holder the claim returned.
        missing = err(await winner.call_tool("pad_item_renew", {"ref": ref, "epoch": epoch}))
        assert missing["code"] == "validation_failed" and "lease.holder" in missing["message"], missing
        ok(await winner.call_tool("pad_item_renew", {"ref": ref, "epoch": epoch, "holder": holder}))
        done = ok(await winner.call_tool("pad_item_complete", {"ref": ref, "epoch": epoch, "holder": holder}))
        assert done["item"]["status"] == "done", done


async def main():
    await stdio_sessions()
    await http_sessions()
    print("agents: 1 passed, 0 failed")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"agents: assertion failed: {e}", file=sys.stderr)
        raise
