#!/usr/bin/env python3
"""Writes judgements.tsv (query id, agent id, grade) from the grades a
judge gave by reading (grades.tsv) and the judging pools.

    AGENTMESH_RELEVANCE_POOL=/tmp/pool.ndjson \
        cargo test --test relevance_mcp -- --ignored write_the_judging_pool
    python3 tests/relevance/mcp/judge.py /tmp/pool.ndjson [MORE.ndjson ...] > tests/relevance/mcp/judgements.tsv
    python3 tests/relevance/mcp/judge.py --show TOPIC /tmp/pool.ndjson   # what to read

Several pool files (say, before and after a ranking change) are joined:
every server any of them pooled is judged.

grades.tsv lines are `TOPIC<TAB>AGENT<TAB>GRADE` (the grade of a pooled
server for the topic's need, read against topics.tsv) or
`qN<TAB>AGENT<TAB>GRADE` (query N's own grade, for a query narrower than
its topic). A pooled server with no line is a 0: it was read and is not
what the topic asks for. A line may also grade a server no ranker pooled
(one the judge found relevant while reading other pools); it is judged
for the topic's queries too.

Each query is judged over the pools of every query of its topic. Then:
- a filtered query grades 0 every server outside its filter;
- a query naming a language in words (shape `language`) grades a server at
  most 2 unless a `qN` line says otherwise (its description shows the
  language).
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent


def tsv(name):
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            yield line.split("\t")


def main():
    args = sys.argv[1:]
    show = None
    if args and args[0] == "--show":
        show, args = args[1], args[2:]
    # One or more pool files (the pools of successive rankings): each
    # query's pool is their union, in first-seen order.
    pools = []
    for path in args:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            if len(pools) < q["query"]:
                pools.append(q)
            else:
                held = pools[q["query"] - 1]
                held["pool"] += [a for a in q["pool"] if a not in held["pool"]]
    corpus = {}
    for line in (HERE / "corpus.ndjson").read_text(encoding="utf-8").splitlines():
        s = json.loads(line)
        tags = {"mcp"} | {p["registryType"] for p in s.get("packages", [])}
        corpus["mcp:" + s["name"]] = (s, tags)
    topic_pool = defaultdict(list)
    for q in pools:
        for a in q["pool"]:
            if a not in topic_pool[q["topic"]]:
                topic_pool[q["topic"]].append(a)
    if show:
        for q in pools:
            if q["topic"] == show:
                print(f"q{q['query']} [{q['shape']}] {q['tags'] or ''} {q['text']}")
        for i, a in enumerate(topic_pool[show]):
            s, tags = corpus[a]
            extra = ",".join(sorted(tags - {"mcp"}))
            print(f"{i}\t{a}\t{s.get('title', '')}\t{s['description']}\t{extra}")
        return
    topic_grade, query_grade = {}, {}
    for key, agent, grade in tsv("grades.tsv"):
        if agent not in corpus:
            sys.exit(f"grades.tsv: {agent} is not in the corpus")
        g = int(grade)
        if not 0 <= g <= 3:
            sys.exit(f"grades.tsv: grade {g}")
        if key.startswith("q") and key[1:].isdigit():
            query_grade[(int(key[1:]), agent)] = g
        else:
            topic_grade[(key, agent)] = g
    print("# query\tagent\tgrade (written by judge.py from grades.tsv; see SOURCE.md)")
    for q in pools:
        n = q["query"]
        judged = list(topic_pool[q["topic"]])
        # Servers a judge graded though no ranker pooled them (found while
        # reading other pools or the corpus): judged too.
        for (key, a) in list(topic_grade) + [(f"q{m}", a) for (m, a) in query_grade]:
            if key in (q["topic"], f"q{n}") and a not in judged:
                judged.append(a)
        for a in judged:
            g = topic_grade.get((q["topic"], a), 0)
            if (n, a) in query_grade:
                g = query_grade[(n, a)]
            elif q["shape"] == "language":
                g = min(g, 2)
            if not set(q["tags"]) <= corpus[a][1]:
                g = 0
            print(f"{n}\t{a}\t{g}")


if __name__ == "__main__":
    main()
