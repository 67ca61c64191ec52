"""Schemathesis hooks for the MCP Registry's document against a node
(tests/mcp_registry/interop.rs loads them in its run of valid requests).

The document bounds nothing of `GET /v0.1/servers`'s query and gives the
operation no status but 200, yet a registry must refuse some of what
that allows: the official registry answers 422 to a `limit` outside 1 to
100 and to a cursor it did not give (the document itself says to pass
back only the cursors it returned), and a node answers 400 to those and
to a `search` longer than 256 bytes. The valid requests are kept inside
those bounds here, so that every other status is checked against the
document; the run of every request sends the rest.
"""

import schemathesis

MAX_LIMIT = 100
MAX_SEARCH_BYTES = 256


def is_list(ctx):
    op = ctx.operation
    return op is not None and op.method.upper() == "GET" and op.path == "/v0.1/servers"


@schemathesis.hook
def map_query(ctx, query):
    if not is_list(ctx) or not isinstance(query, dict):
        return query
    query = dict(query)
    query.pop("cursor", None)
    limit = query.get("limit")
    if isinstance(limit, int) and not isinstance(limit, bool):
        query["limit"] = min(max(limit, 1), MAX_LIMIT)
    search = query.get("search")
    if isinstance(search, str):
        query["search"] = search.encode()[:MAX_SEARCH_BYTES].decode(errors="ignore")
    return query
