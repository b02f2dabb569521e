"""Rank-side code of the suite: what every rank runs for a case, through the adapter.

Tasks build their inputs from plain case data (shapes, dtype names, seeds) with the same
generator the oracle uses, call the implementation, and return plain results. They never judge.
"""
