"""Hyper-parameters are explicit keywords (what IDEs, ``help()``, mypy, jsonargparse and the API pages read): no
``**kwargs`` in a public loss signature, and the keywords repeated across signatures keep one name and one default."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

import ranklit.functional as F
from ranklit.functional import HAPOptions, SupAPOptions
from ranklit.losses import HAPLoss, HAPPIERLoss, ROADMAPLoss, SupAPLoss, list_losses, loss_entry

FUNCTIONAL_LOSSES = [name for name in F.__all__ if name.endswith("_loss") or name == "hap_surrogate"]


def _parameters(obj: object) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(obj).parameters)  # type: ignore[arg-type]


@pytest.mark.parametrize("obj", [*list_losses(), *FUNCTIONAL_LOSSES])
def test_no_var_keyword_in_a_public_loss_signature(obj: str) -> None:
    target = loss_entry(obj).cls if obj in list_losses() else getattr(F, obj)
    kinds = {p.kind for p in _parameters(target).values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds and inspect.Parameter.VAR_POSITIONAL not in kinds


@pytest.mark.parametrize(
    ("target", "options"),
    [
        (SupAPLoss, SupAPOptions),
        (ROADMAPLoss, SupAPOptions),
        (F.supap_loss, SupAPOptions),
        (HAPLoss, HAPOptions),
        (HAPPIERLoss, HAPOptions),
        (F.hap_loss, HAPOptions),
        (F.hap_surrogate, HAPOptions),
    ],
)
def test_explicit_keywords_have_the_options_names_and_defaults(target: object, options: type) -> None:
    params = _parameters(target)
    for option in fields(options):
        assert option.name in params, f"{target} lacks the keyword {option.name}"
        assert params[option.name].default == option.default, option.name
        assert params[option.name].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("name", list_losses(takes_reducer=True))
def test_one_vocabulary(name: str) -> None:
    """``reducer`` defaults to ``"mean"``; ``chunk_size`` and ``include_self``, where they apply, keep their names."""
    params = _parameters(loss_entry(name).cls)
    assert params["reducer"].default == "mean"
    assert not {"class_balanced", "chunk", "num_chunks", "exclude_self", "self_included"} & set(params)
