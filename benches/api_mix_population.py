#!/usr/bin/env python3
"""AIDIP documents for benches/api_mix.sh: N agents (bench-000000 ..) with
capabilities, tags, languages and descriptions drawn from small word lists,
so that filters, free text and intents find some of them. Deterministic:
the same N gives the same lines. Usage: api_mix_population.py N > FILE"""
import json
import random
import sys

CAPABILITIES = ["translation", "summarization", "search", "scheduling", "billing",
                "code_review", "legal_review", "data_analysis", "image_captioning",
                "speech_to_text", "weather", "travel_booking", "customer_support",
                "fraud_detection", "recommendation", "sentiment_analysis"]
TAGS = ["finance", "legal", "health", "retail", "travel", "media", "education",
        "logistics", "energy", "government", "gaming", "security"]
LANGUAGES = ["en", "de", "fr", "es", "zh", "ja", "pt", "it"]
WORDS = ["contracts", "invoices", "news", "emails", "reports", "tickets", "flights",
         "meetings", "claims", "orders", "articles", "podcasts", "receipts", "papers"]


def main():
    n = int(sys.argv[1])
    rng = random.Random(43)
    out = sys.stdout
    for i in range(n):
        caps = rng.sample(CAPABILITIES, rng.randint(1, 3))
        tags = rng.sample(TAGS, rng.randint(1, 2))
        langs = rng.sample(LANGUAGES, rng.randint(1, 3))
        words = rng.sample(WORDS, 2)
        doc = {
            "id": f"bench-{i:06d}",
            "name": f"{caps[0].replace('_', ' ').title()} for {words[0]} {i}",
            "description": f"Does {', '.join(c.replace('_', ' ') for c in caps)} "
                           f"of {words[0]} and {words[1]} for {tags[0]} teams.",
            "version": "1.0.0",
            "capabilities": caps,
            "tags": tags,
            "endpoint": f"https://agents.example.net/bench-{i:06d}",
            "supported_languages": langs,
            "authentication": {"type": "api_key"},
            "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
            "outputs": {"type": "object"},
        }
        out.write(json.dumps(doc, separators=(",", ":")))
        out.write("\n")


if __name__ == "__main__":
    main()
