"""Reads an agentmesh node's MCP Registry API with mcp-registry-sdk
(PyPI, import name `mcpreg`), a client others wrote to the registry's
OpenAPI document, and prints what it saw as one JSON object for
tests/mcp_registry/interop.rs to check.

Usage: sdk_client.py BASE_URL NAME DELETED PAGE_SIZE

- BASE_URL: the node's API root (the client adds /v0.1);
- NAME: a server held, read by name, by version and its versions;
- DELETED: a server the registry deleted;
- PAGE_SIZE: the `limit` the listings ask for, so that they take pages.
"""

import asyncio
import json
import sys
from datetime import datetime, timedelta, timezone

from mcpreg import RegistryClient, RegistrySettings
from mcpreg.exceptions import HttpError
from mcpreg.settings import HttpSettings
from mcpreg.sync import InMemorySyncStateStore, incremental_pull

def summary(entry):
    meta = entry.meta.official if entry.meta else None
    return {
        "name": entry.server.name,
        "version": entry.server.version,
        "status": entry.status.value if entry.status else None,
        "statusMessage": meta.status_message if meta else None,
        "isLatest": meta.is_latest if meta else None,
        "updatedAt": meta.updated_at if meta else None,
    }


def refusal(e):
    return {"type": type(e).__name__, "status_code": e.status_code, "error": e.error}


async def refused(call):
    try:
        entry = await call
    except HttpError as e:
        return refusal(e)
    return {"unexpected": summary(entry)}


async def pull(client, store):
    upserts, removals = [], []
    # The registry's own page size: incremental_pull asks each next page
    # with the mark it raised on the pages before (mcp-registry-sdk 0.1.0),
    # so a pass over several pages of a registry listed by name skips
    # whatever the later pages hold that changed before that mark.
    async for changes in incremental_pull(client, store):
        upserts += [e.server.name for e in changes.upserts]
        removals += [e.server.name for e in changes.removals]
    return upserts, removals


async def main(base, name, deleted, limit):
    # One attempt per request: a retry would hide a failing answer.
    settings = RegistrySettings(base_url=base, http=HttpSettings(timeout=20, max_attempts=1))
    out = {}
    async with RegistryClient(settings) as client:
        # Page by page, by the cursors the node gives.
        listed, counts, cursor = [], [], None
        while True:
            page = await client.list_servers(cursor=cursor, limit=limit)
            listed += [summary(e) for e in page.servers]
            counts.append(page.metadata.count if page.metadata else None)
            cursor = page.next_cursor
            if cursor is None:
                break
            if len(counts) > 100:
                raise SystemExit("more than 100 pages")
        out["listed"] = listed
        out["pages"] = len(counts)
        out["page_counts"] = counts

        # The client's own paging, with deleted servers.
        out["with_deleted"] = [
            {"name": e.server.name, "status": e.status.value if e.status else None}
            async for e in client.iter_servers(limit=limit, include_deleted=True)
        ]

        latest = await client.get_version(name)
        out["one"] = summary(latest) | {
            "title": latest.server.title,
            "packages": [p.identifier for p in latest.server.packages or []],
            "remotes": [r.type for r in latest.server.remotes or []],
        }
        out["exact"] = (await client.get_version(name, latest.server.version)).server.version
        versions = await client.list_versions(name)
        out["versions"] = [e.server.version for e in versions.servers]

        out["deleted_hidden"] = await refused(client.get_version(deleted))
        gone = await client.get_version(deleted, include_deleted=True)
        out["deleted_asked"] = gone.status.value if gone.status else None
        out["missing"] = await refused(client.get_version("io.example/no-such-server"))
        out["missing_version"] = await refused(client.get_version(name, "0.0.0-nope"))

        # A sub-registry following the node: from nothing, then from the
        # mark the first pull saved.
        store = InMemorySyncStateStore()
        upserts, removals = await pull(client, store)
        mark = (await store.load()).updated_since
        out["incremental"] = {"upserts": upserts, "removals": removals, "mark": mark}
        upserts, removals = await pull(client, store)
        out["incremental_again"] = {"upserts": upserts, "removals": removals}

        # updated_since as a time in another zone: the same instant.
        india = timezone(timedelta(hours=5, minutes=30))
        later = datetime.fromisoformat(mark).astimezone(india)
        page = await client.list_servers(updated_since=later)
        out["since_mark_in_india"] = [e.server.name for e in page.servers]
        earlier = datetime(2000, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
        page = await client.list_servers(updated_since=earlier, limit=100)
        out["since_2000_in_paris"] = sorted(e.server.name for e in page.servers)
    print(json.dumps(out))


if __name__ == "__main__":
    base, name, deleted, limit = sys.argv[1:5]
    asyncio.run(main(base, name, deleted, int(limit)))
