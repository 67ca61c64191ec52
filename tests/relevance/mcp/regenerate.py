#!/usr/bin/env python3
"""Regenerates corpus.ndjson, the MCP relevance set's corpus (see SOURCE.md).

Reads three MIT-licensed sources straight from git (a clone or a bare
mirror of each repository, at the commits below) and writes one MCP
Registry `server.json` per line, in the shape `agentmesh import --format
mcp-registry` reads:

    python3 tests/relevance/mcp/regenerate.py \
        --registry PATH/TO/modelcontextprotocol/registry.git \
        --servers PATH/TO/modelcontextprotocol/servers.git \
        --awesome PATH/TO/wong2/awesome-mcp-servers.git \
        --tensorblock PATH/TO/TensorBlock/awesome-mcp-servers.git \
        > tests/relevance/mcp/corpus.ndjson

Deterministic: the same commits give the same bytes.
"""

import argparse
import json
import re
import subprocess
import sys
from urllib.parse import urlparse

REGISTRY = ("81e5174a593a7488715b0bf0ae77a4dc466b4d35", "data/seed_2025_05_16.json")
SERVERS = ("d9c45477cd6ff4d3456c138498dca984c8697f43", "README.md")
AWESOME = ("39eb1d76d76e562657f3c657266a504cea159e23", "README.md")
TENSORBLOCK = "8db761c3e0d7a9dd7181fddeb6e5fb52a41ad553"
# Of TensorBlock's 7,700 entries, every TENSORBLOCK_EVERY-th of each
# category page (in page order) is kept: a sample that favours no topic,
# small enough for a debug-build test to load in seconds.
TENSORBLOCK_EVERY = 5

# The importer's (and the schema's) bounds.
MAX_DESCRIPTION = 100
MAX_TITLE = 100
LIST_VERSION = "0.0.0"
# The seed's package registries, as server.json 2025-12-11 names them.
REGISTRY_TYPES = {"npm": "npm", "pypi": "pypi", "docker": "oci"}


def show(git_dir, commit, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")


def clean(text):
    """Markdown and HTML out, whitespace collapsed."""
    text = re.sub(r"<[^>]*>", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("**", "").replace("`", "")
    # Emoji and pictographs (the lists mark entries with them).
    text = re.sub(
        "[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D\u2B50\u2B55\u2705\u274C]", " ", text
    )
    return " ".join(text.split())


def bounded(text, most):
    """At most `most` characters, cut at a word boundary."""
    if len(text) <= most:
        return text
    cut = text[: most + 1].rsplit(" ", 1)[0]
    if len(cut) < most // 2:
        cut = text[:most]
    return cut[:most].rstrip(" ,;:-(")


def slug(text):
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return s or "server"


def name_of(url, title):
    """The registry's naming: io.github.OWNER/REPO for GitHub, else the
    reversed host and a slug of the title."""
    u = urlparse(url)
    host = (u.hostname or "").lower()
    parts = [p for p in u.path.split("/") if p]
    if host == "github.com" and len(parts) >= 2:
        name = f"io.github.{slug(parts[0])}/{slug(parts[1])}"
        if len(parts) >= 5 and parts[2] in ("tree", "blob"):
            # A server inside a monorepo: its folder names it.
            name += "-" + slug(parts[-1])
        return name
    if host:
        return ".".join(reversed(host.split("."))) + "/" + slug(title)
    return None


def registry_seed(git_dir):
    for s in json.loads(show(git_dir, *REGISTRY)):
        desc = bounded(clean(s.get("description", "")), MAX_DESCRIPTION)
        if not desc:
            continue
        out = {"name": s["name"], "description": desc}
        out["version"] = s.get("version_detail", {}).get("version", LIST_VERSION)
        repo = s.get("repository", {}).get("url")
        if repo:
            out["repository"] = {"url": repo}
        packages = []
        for p in s.get("packages", []):
            kind = REGISTRY_TYPES.get(p.get("registry_name"))
            if kind and p.get("name"):
                packages.append({"registryType": kind, "identifier": p["name"]})
        if packages:
            out["packages"] = packages
        yield out, repo


ENTRY = re.compile(
    r"^\s*[-*]\s+(?:<img[^>]*>\s*)?\*\*\[([^\]]+)\]\(([^)]+)\)\*\*\s*[-–—:]?\s*(.*)$"
)
# TensorBlock's pages: `- [owner/repo](url): description`.
PLAIN_ENTRY = re.compile(r"^\s*-\s+\[([^\]]+)\]\((https?://[^)]+)\):\s*(.*)$")


def entries(text, start, stop, pattern=ENTRY):
    """The (title, url, description) of the entries between the headings
    `start` and `stop` (`None`: from the top, to the end)."""
    inside = start is None
    for line in text.splitlines():
        if line.startswith("#"):
            if start is not None and start in line:
                inside = True
            elif stop is not None and stop in line:
                inside = False
        if not inside:
            continue
        m = pattern.match(line)
        if m:
            yield m.group(1), m.group(2), m.group(3)


def tensorblock(git_dir):
    pages = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "--name-only", f"{TENSORBLOCK}:docs"],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8").split()
    for page in sorted(p for p in pages if p.endswith(".md")):
        text = show(git_dir, TENSORBLOCK, f"docs/{page}")
        for i, entry in enumerate(entries(text, None, None, PLAIN_ENTRY)):
            if i % TENSORBLOCK_EVERY == 0:
                yield entry


def listed(found, base):
    """Servers of list entries."""
    for title, url, desc in found:
        title, url, desc = clean(title), url.strip(), clean(desc)
        if not url.startswith("http"):
            url = base + url.lstrip("/")
        name = name_of(url, title)
        desc = bounded(desc, MAX_DESCRIPTION)
        if not name or not desc:
            continue
        out = {
            "name": name,
            "title": bounded(title, MAX_TITLE),
            "description": desc,
            "version": LIST_VERSION,
        }
        if urlparse(url).hostname == "github.com":
            out["repository"] = {"url": url}
        else:
            out["websiteUrl"] = url
        yield out, url


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--registry", required=True)
    ap.add_argument("--servers", required=True)
    ap.add_argument("--awesome", required=True)
    ap.add_argument("--tensorblock", required=True)
    args = ap.parse_args()
    servers_base = "https://github.com/modelcontextprotocol/servers/tree/main/"
    sources = [
        registry_seed(args.registry),
        listed(entries(show(args.servers, *SERVERS), "Third-Party Servers", "Frameworks"), servers_base),
        listed(entries(show(args.awesome, *AWESOME), "Official Servers", "Clients"), servers_base),
        listed(tensorblock(args.tensorblock), servers_base),
    ]
    names, urls = set(), set()
    kept = 0
    for label, source in zip(["registry", "servers", "wong2", "tensorblock"], sources):
        before = kept
        for server, url in source:
            key = (url or "").lower().rstrip("/").removesuffix(".git")
            # The seed's servers are told apart by name only: several
            # share one repository (the reference servers' monorepo).
            by_url = label != "registry" and key and key in urls
            if server["name"].lower() in names or by_url:
                continue
            names.add(server["name"].lower())
            if key:
                urls.add(key)
            print(json.dumps(server, ensure_ascii=False, separators=(",", ":")))
            kept += 1
        print(f"{label}: {kept - before} servers", file=sys.stderr)
    print(f"{kept} servers", file=sys.stderr)


if __name__ == "__main__":
    main()
