"""polythink's benchmark suite: polythink against raw httpx and the peer SDKs, under load.

Run it with ``polythink bench`` or ``python -m benchmarks`` (``--quick`` for a short run);
see ``benchmarks/README.md``.
"""
