"""Every public name of ``ranklit.losses``, ``ranklit.metrics`` and ``ranklit.functional`` has a doctested example
that shows a concrete value (issue #15), not only a range check such as ``> 0`` or a bare ``True``."""

from __future__ import annotations

import importlib
import inspect
import re

MODULES = ("ranklit.functional", "ranklit.losses", "ranklit.metrics")

# an output line that only says a check passed: True/False, or nothing but a comparison's result
_BOOLEAN_OUTPUT = re.compile(r"^\s*(True|False|tensor\((True|False)\))\s*$")
# a source line that ends in a range check: `... > 0`, `... >= 0.5`, `0 < x < 1`, `.all()`, `torch.isfinite(...)`
_RANGE_CHECK = re.compile(r"(<=?|>=?)\s*-?[\d.]+\s*\)?\s*$|^\s*-?[\d.]+\s*<=?|\.all\(\)\s*$|isfinite")


def _examples(obj: object) -> list[tuple[str, str]]:
    """``(source, expected output)`` of each ``>>>`` statement of the docstring (continuation lines joined)."""
    doc = inspect.getdoc(obj) or ""
    pairs: list[tuple[str, str]] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith(">>> "):
            source = line[4:]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("..."):
                source += "\n" + lines[i].strip()[4:]
                i += 1
            output = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>>"):
                output.append(lines[i].strip())
                i += 1
            pairs.append((source, "\n".join(output)))
        else:
            i += 1
    return pairs


def problem(obj: object) -> str | None:
    """Why ``obj``'s docstring does not show a concrete value, or ``None`` when it does."""
    examples = _examples(obj)
    if not examples:
        return "no `>>>` example"
    shown = [(source, output) for source, output in examples if output]
    if not shown:
        return "the example shows no output"
    if all(_BOOLEAN_OUTPUT.match(output) or _RANGE_CHECK.search(source) for source, output in shown):
        return "the example only shows a boolean / range check, not a value"
    sources = "\n".join(source for source, _ in examples)
    if re.search(r"\brand(n|int|perm)?\(", sources) and "manual_seed" not in sources:
        return "the example draws random numbers without `torch.manual_seed`"
    return None


def offenders() -> list[str]:
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            why = problem(obj)
            if why is not None:
                found.append(f"{name}.{attr}: {why}")
    return found


def test_checker_tells_values_from_range_checks() -> None:
    def good() -> None:
        """Example:
        >>> round(0.123456, 4)
        0.1235
        """

    def range_only() -> None:
        """Example:
        >>> 0.3 > 0
        True
        >>> x = 2
        >>> x >= 1
        True
        """

    def none() -> None:
        """No example."""

    assert problem(good) is None
    assert problem(range_only) == "the example only shows a boolean / range check, not a value"
    assert problem(none) == "no `>>>` example"

    def unseeded() -> None:
        """Example:
        >>> import torch
        >>> torch.randn(2).shape
        torch.Size([2])
        """

    assert problem(unseeded) == "the example draws random numbers without `torch.manual_seed`"


def test_every_public_name_has_a_concrete_example() -> None:
    found = offenders()
    assert not found, f"{len(found)} public names without a concrete doctested value:\n" + "\n".join(found)
