"""The oracle: a single-process model of ``spec/``, written from the spec alone.

It answers, as plain data, what every rank *should* return for a case: layouts, verdicts (valid,
or the rule broken and the error type) and expected per-rank tensors. It never imports
``reference/``: the two are independent derivations of the same rules, so a bug shared by both
would have to be made twice.

One module per spec chapter; ``vocabulary`` holds the words every chapter uses.
"""
