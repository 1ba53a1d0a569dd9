"""Scrapes a Prometheus endpoint and parses it with the official client library's parser.

usage: prometheus_scrape.py URL
Prints one JSON object: {"content_type": "...", "samples": [[name, {labels}, value], ...],
"types": {family: type}}. Exits 1 when the text does not parse.
"""
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

with urllib.request.urlopen(sys.argv[1], timeout=5) as response:
    content_type = response.headers.get("Content-Type", "")
    text = response.read().decode("utf-8")

samples, types = [], {}
try:
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.append([sample.name, sample.labels, sample.value])
except Exception as error:  # the parser raises ValueError and others on bad input
    print(json.dumps({"error": str(error), "text": text}))
    sys.exit(1)
print(json.dumps({"content_type": content_type, "samples": samples, "types": types}))
