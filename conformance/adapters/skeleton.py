"""``python -m conformance skeleton CAPABILITY...``: an adapter to fill in, as a module.

Every method the chosen capabilities need (``contract.methods_for``) is there with the contract's
signature and docstring, and raises ``NotImplementedInAdapter`` with its contract line until it
is written; the suite reports a test that reaches one as *not implemented*, never as a pass. So a
port starts from a file that runs, and each method written turns its tests into verdicts.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Sequence

from conformance.adapters import contract

# Names the contract's annotations use, and the import each needs in the skeleton's module.
_IMPORTS = {
    "Any": "from typing import Any",
    "Sequence": "from collections.abc import Sequence",
    "torch": "import torch",
    "dist": "import torch.distributed as dist",
    "ShardBox": "from conformance.vocabulary import ShardBox",
}


def render(capabilities: Sequence[str], name: str = "mine", class_name: str = "MyAdapter") -> str:
    """The module's text; ``ValueError`` for a capability the contract does not define."""
    unknown = [c for c in capabilities if c not in contract.CAPABILITIES]
    if not capabilities:
        raise ValueError(f"name the capabilities to claim: {', '.join(contract.CAPABILITIES)}")
    if unknown:
        raise ValueError(
            f"unknown capabilities {', '.join(unknown)}; choose from "
            f"{', '.join(contract.CAPABILITIES)}"
        )
    claimed = list(dict.fromkeys([*_families(capabilities), *capabilities]))
    methods = [_method(m) for m in contract.methods_for(claimed)]
    used = {word for text in methods for word in re.findall(r"\b\w+\b", text.split('"""')[0])}
    used |= {"NotImplementedInAdapter"} if methods else set()
    return _MODULE.format(
        capabilities="\n".join(
            textwrap.wrap(f"A shardspec adapter: {', '.join(claimed)}.", width=96)
        ),
        imports=_imports(used),
        class_name=class_name,
        name=name,
        claimed="".join(f"\n            {_quoted(c)}," for c in claimed),
        body="\n\n".join(methods) if methods else "    pass",
    )


def _imports(used: set[str]) -> str:
    """The imports the signatures need, grouped as ruff's isort groups them."""
    named = {word: line for word, line in _IMPORTS.items() if word in used}
    contract_names = sorted(
        {w for w in used if w.endswith("Like") or w == "NotImplementedInAdapter"}, key=str.lower
    )
    groups = [
        sorted(line for word, line in named.items() if word in ("Any", "Sequence")),
        sorted(line for word, line in named.items() if word in ("torch", "dist")),
        sorted(
            [_from_import("conformance.adapters.contract", contract_names)] * bool(contract_names)
            + [line for word, line in named.items() if word == "ShardBox"]
        ),
    ]
    text = "\n\n".join("\n".join(group) for group in groups if group)
    return f"{text}\n\n" if text else ""


_MODULE = '''\
"""{capabilities}

From `python -m conformance skeleton`: write each method; until then it raises
NotImplementedInAdapter, and the suite reports the tests that reach it as "not implemented".
Run it: python -m conformance run --impl <this module>:ADAPTER
"""

from __future__ import annotations

{imports}
class {class_name}:
    name = "{name}"
    release = "0.0.0"  # your implementation's version: run headers show it
    capabilities = frozenset(
        {{{claimed}
        }}
    )

{body}


ADAPTER = {class_name}()
'''


def _families(capabilities: Sequence[str]) -> list[str]:
    """The family each capability extends (``dtensor`` for ``dtensor_ops``): its tests need
    both claimed."""
    return [contract.FAMILY[c] for c in capabilities if c in contract.FAMILY]


def _method(name: str) -> str:
    """The method as the contract declares it, raising with its contract line."""
    function = getattr(contract.Adapter, name)
    signature = inspect.signature(function)
    params = [str(p).replace("'", "") for p in signature.parameters.values()]
    returns = str(signature.return_annotation).replace("'", "")
    head = f"    def {name}({', '.join(params)}) -> {returns}:"
    if len(head) > 100:
        head = f"    def {name}(\n" + "".join(f"        {p},\n" for p in params)
        head += f"    ) -> {returns}:"
    doc = inspect.getdoc(function) or ""
    line = " ".join(doc.split("\n\n")[0].split())
    pieces = textwrap.wrap(line, width=84, drop_whitespace=False)
    message = "\n".join(f"            {_quoted(piece)}" for piece in pieces)
    return (
        f"{head}\n{textwrap.indent(f'{chr(34) * 3}{doc}{chr(34) * 3}', ' ' * 8)}\n"
        f"        raise NotImplementedInAdapter(\n"
        f"            {_quoted(name)},\n{message},\n        )"
    )


def _from_import(module: str, names: list[str]) -> str:
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 100:
        return line
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")"


def _quoted(text: str) -> str:
    """A string literal as ruff formats it: in double quotes, unless it holds some and no
    single quote."""
    quote = "'" if '"' in text and "'" not in text else '"'
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote
