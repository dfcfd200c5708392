#!/usr/bin/env python3
"""Checks the hash chains of an NDJSON export of events (`GET /v1/documents/{id}/events`,
`kuatia events export`) from the published formula alone, with no kuatia code (docs/events.md,
"The hash chain"): per stream, in order from version 1,

    hash = SHA-256(canonical JSON of {prev_hash, event_id, tenant_id, stream_type, stream_id,
                   stream_version, event_type, schema_version, payload, metadata, recorded_at})

canonical JSON: keys sorted at every level, no insignificant white space, UTF-8; `prev_hash` the
previous event's hash (null for version 1); `recorded_at` RFC 3339 UTC with microseconds.

Usage: verify_chain.py FILE   → prints "ok N" and exits 0, or "broken VERSION REASON" and exits 1.
"""
import hashlib
import json
import sys
from datetime import datetime, timezone


def micros(text):
    # RFC 3339 with any fraction and offset → UTC with exactly six fraction digits and "Z".
    head, _, tail = text.replace("Z", "+00:00").partition(".")
    if tail:
        digits = "".join(c for c in tail if c.isdigit())
        rest = tail[len(digits):]
        text = f"{head}.{(digits + '000000')[:6]}{rest}"
    at = datetime.fromisoformat(text).astimezone(timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def main(path):
    heads = {}
    count = 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            # Numbers are kept as written (Decimal for fractions), so amounts hash as stored.
            event = json.loads(line, parse_float=_Raw)
            stream, version = event["stream_id"], event["stream_version"]
            expected_prev, expected_version = heads.get(stream, (None, 1))
            if version != expected_version:
                print(f"broken {version} expected version {expected_version}")
                return 1
            if event.get("prev_hash") != expected_prev:
                print(f"broken {version} prev_hash does not name the previous event")
                return 1
            canonical = {
                "prev_hash": expected_prev,
                "event_id": event["event_id"],
                "tenant_id": event["tenant_id"],
                "stream_type": event["stream_type"],
                "stream_id": stream,
                "stream_version": version,
                "event_type": event["event_type"],
                "schema_version": event["schema_version"],
                "payload": event["payload"],
                "metadata": event["metadata"],
                "recorded_at": micros(event["recorded_at"]),
            }
            digest = hashlib.sha256(dumps(canonical).encode("utf-8")).hexdigest()
            if digest != event["hash"]:
                print(f"broken {version} hash does not cover the event")
                return 1
            heads[stream] = (digest, version + 1)
            count += 1
    print(f"ok {count}")
    return 0


class _Raw(str):
    """A JSON number with a fraction, written back exactly as it was read."""


def dumps(value):
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + dumps(v) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, _Raw):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
