#!/usr/bin/env python3
"""Verifies a kuatia webhook signature without any of kuatia's code (CI's independent check).

usage: verify_webhook.py BODY_FILE SIGNATURE_HEADER SECRET [SECRET...]

The header is `t=<unix>,v1=<hex>[,v1=<hex>]`; the HMAC-SHA-256 of `<t>.<raw body>` is computed
by `openssl dgst -sha256 -hmac <secret>` and compared in constant time with every `v1`. Exit 0
when each SECRET given matches one `v1` and `t` is within 5 minutes of now; 1 otherwise.
"""
import hmac
import subprocess
import sys
import time


def openssl_hmac(secret: str, message: bytes) -> str:
    out = subprocess.run(
        ["openssl", "dgst", "-sha256", "-hmac", secret],
        input=message,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return out.strip().split("= ")[-1]


def main() -> int:
    body_file, header, secrets = sys.argv[1], sys.argv[2], sys.argv[3:]
    body = open(body_file, "rb").read()
    fields = [p.split("=", 1) for p in header.split(",")]
    timestamps = [v for k, v in fields if k == "t"]
    signatures = [v for k, v in fields if k == "v1"]
    if len(timestamps) != 1 or not signatures:
        print(f"malformed header: {header}")
        return 1
    t = timestamps[0]
    if abs(time.time() - int(t)) > 300:
        print(f"timestamp {t} outside the tolerance")
        return 1
    for secret in secrets:
        expected = openssl_hmac(secret, t.encode() + b"." + body)
        if not any(hmac.compare_digest(expected, s) for s in signatures):
            print(f"no v1 matches the secret {secret[:10]}...")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
