#!/usr/bin/env python3
"""Summarises a raw email (RFC 5322 + MIME) as JSON with Python's own parser, independently of
the code that built it: subject, to, the plain-text body, and each attachment's filename, type,
size and SHA-256.

usage: mime_summary.py MESSAGE_FILE
"""
import email
import email.policy
import hashlib
import json
import sys

message = email.message_from_binary_file(open(sys.argv[1], "rb"), policy=email.policy.default)
attachments = []
for part in message.iter_attachments():
    payload = part.get_payload(decode=True) or b""
    attachments.append(
        {
            "filename": part.get_filename(),
            "content_type": part.get_content_type(),
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
    )
body = message.get_body(preferencelist=("plain",))
print(
    json.dumps(
        {
            "subject": str(message["subject"]),
            "to": str(message["to"]),
            "from": str(message["from"]),
            "text": body.get_content() if body is not None else "",
            "attachments": attachments,
        }
    )
)
