"""Item 4: the cursor codec against raw AES-GCM on the same bytes.

The codec round trip is ``CursorCodec.seal(payload)`` then ``CursorCodec.open(token)`` on the payload the server
seals for a real next-page position; the baseline is ``AESGCM.encrypt`` (with a fresh ``os.urandom(12)`` nonce)
then ``AESGCM.decrypt`` of exactly the bytes the codec encrypts, with the same associated data length. The
cursor helpers around the codec (``make_cursor`` + ``read_cursor``, binding and expiry checks included) are
reported as well. Target: codec round trip <= 5x raw AES-GCM.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import fmt_time, interleaved, median, verdict, write_result

TARGET = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    args = parser.parse_args()

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from mcp_resources.protocol.cursors import Binding, CursorCodec, fingerprint, make_cursor, read_cursor

    codec = CursorCodec(["benchmark cursor key, 32 bytes!"])
    binding = Binding(
        "resources/list",
        "",
        fingerprint("3", "manage.py", "documents:read", "http://127.0.0.1:8000/mcp"),
        fingerprint("documents\x00learn://documents/{id}", "notes\x00learn://notes/{id}"),
    )
    position = ["documents", ["2024-01-01T13:53:20+00:00", 1050000]]
    started = time.time()
    token = make_cursor(codec, binding, position, started)
    payload = codec.open(token)
    data = json.dumps(payload, separators=(",", ":")).encode()  # the codec's serialization (insertion order)
    aad = b"mcp-resources-cursor/v2/" + b"kid!"
    aead = AESGCM(os.urandom(32))

    def raw() -> bytes:
        nonce = os.urandom(12)
        return aead.decrypt(nonce, aead.encrypt(nonce, data, aad), aad)

    def codec_round_trip() -> dict[str, Any]:
        return codec.open(codec.seal(payload))

    def cursor_round_trip() -> Any:
        return read_cursor(codec, make_cursor(codec, binding, position, started), binding, 900)

    if raw() != data or codec_round_trip() != payload or cursor_round_trip()[0] != position:
        raise SystemExit("a round trip did not give back its input")
    contenders = {"raw AES-GCM": raw, "codec": codec_round_trip, "make+read cursor": cursor_round_trip}
    print(
        f"item 4: cursor codec vs raw AES-GCM on {len(data)} payload bytes ({len(token)}-character token), "
        f"{args.rounds} interleaved rounds"
    )
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    raw_s, codec_s, cursor_s = (median(samples[name]) for name in contenders)
    ratio = codec_s / raw_s
    print(
        f"  raw AES-GCM encrypt+decrypt {fmt_time(raw_s)}, codec seal+open {fmt_time(codec_s)}, "
        f"make_cursor+read_cursor {fmt_time(cursor_s)}"
    )
    print(
        f"codec / raw AES-GCM: {ratio:.2f}x (target <= {TARGET:g}x: {verdict(ratio <= TARGET)}); "
        f"cursor helpers / raw: {cursor_s / raw_s:.2f}x"
    )
    write_result(
        "codec",
        {
            "payload_bytes": len(data),
            "token_chars": len(token),
            "raw_s": raw_s,
            "codec_s": codec_s,
            "cursor_helpers_s": cursor_s,
            "codec_over_raw": ratio,
            "cursor_helpers_over_raw": cursor_s / raw_s,
            "target": TARGET,
            "rounds": args.rounds,
        },
    )


if __name__ == "__main__":
    main()
