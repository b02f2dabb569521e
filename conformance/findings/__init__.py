"""Findings as executable records: each deviation the suite found in PyTorch, kept as a minimal
PyTorch program, the outcome the spec requires of it, and the outcome each release gives.

``python -m conformance findings check`` runs every program on a fresh Gloo world of the
installed PyTorch and fails where a release does not do what its record says, so FINDINGS.md,
which is rendered from the records (``render``), cannot drift from behaviour.
"""
