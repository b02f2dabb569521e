"""Figures, not pass/fail: the rank-world engine (``engine``) and the reference beside PyTorch
(``sharded_tensor``, ``dtensor``). They live here, not in ``reference/``: the teaching code stays
free of the harness and of counters, and each benchmark measures from outside (by wrapping the
``torch.distributed`` calls the reference makes)."""
