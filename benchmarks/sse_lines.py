"""Long server-sent-events lines: decoding time grows with the line, not with its square.

Run ``python -m benchmarks.sse_lines``. Feeds :class:`polythink.transports.sse.SSEDecoder`
one ``data:`` line of 1, 4 and 16 MiB in 16 KiB pieces (what aiohttp hands over) and prints
the seconds each took and the ratio of each to the 1 MiB line, in the same process: linear
assembly gives about 4 and 16, re-joining the whole buffer for every piece about 16 and 256.
Nothing is asserted; the figures go to stdout.
"""

from __future__ import annotations

import time

from polythink.transports.sse import SSEDecoder

PIECE = 16 * 1024
MiB = 1024 * 1024


def seconds_for(size: int) -> float:
    """Best of three: the seconds to decode one ``size``-byte line fed in pieces."""
    line = b"data: " + b"x" * size + b"\n\n"
    best = float("inf")
    for _ in range(3):
        decoder = SSEDecoder()
        began = time.perf_counter()
        for start in range(0, len(line), PIECE):
            events = decoder.feed(line[start : start + PIECE])
        best = min(best, time.perf_counter() - began)
        assert len(events[0][1]) == size
    return best


def main() -> None:
    base = seconds_for(MiB)
    print("line      seconds  ratio to 1 MiB")
    for mib in (1, 4, 16):
        took = seconds_for(mib * MiB)
        print(f"{mib:>2} MiB  {took:9.4f}  {took / base:6.1f}")


if __name__ == "__main__":
    main()
