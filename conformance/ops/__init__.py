"""Operators on DTensors (spec/dt-ops.md): the op catalogue taken from PyTorch's OpInfo database
(``catalogue``) and the inputs an op case hands an implementation (``inputs``)."""
