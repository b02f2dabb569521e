"""Adapters: each maps the suite's vocabulary onto one implementation (see ``contract``)."""

REGISTRY = {
    "reference": "conformance.adapters.reference:ADAPTER",
    "torch": "conformance.adapters.pytorch:ADAPTER",
}
