"""Decision training: fit readouts over the frozen embedded encoder on JevServe-Bench train splits.

This package sits above `bench/` (it reads tasks and their train items) and below `cli.py`; `decide/` only holds
the inference side (`decide/trained.py`), so the server never imports training code.
"""
