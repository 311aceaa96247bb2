"""The public API is the packages' ``__all__`` (CONTRIBUTING "The public API and deprecations"): a snapshot of every
public name, so that a change to the API is a decision (with a CHANGELOG line), never an accident.

To accept a change: ``python -m tests.test_public_api > tests/public_api.txt``, and say it in ``CHANGELOG.md``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("public_api.txt")
PACKAGES = (
    "ranklit",
    "ranklit.errors",
    "ranklit.functional",
    "ranklit.losses",
    "ranklit.metrics",
    "ranklit.index",
    "ranklit.landmarks",
    "ranklit.deploy",
    "ranklit.data",
    "ranklit.models",
    "ranklit.training",
    "ranklit.callbacks",
    "ranklit.viz",
    "ranklit.cli",
)


def public_names() -> Iterator[str]:
    """``package.name`` for every name in the ``__all__`` of each public package, sorted within each package, except
    the losses and metrics: each is declared by its registry (``@register_loss`` / ``@register_metric``), which fills
    ``__all__``, the tests and the docs from that one declaration (adding a loss touches its four files only)."""
    from ranklit.losses import list_losses
    from ranklit.metrics import list_metrics

    registered = {f"ranklit.losses.{name}" for name in list_losses()} | {f"ranklit.metrics.{n}" for n in list_metrics()}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in sorted(module.__all__):
            getattr(module, name)  # every listed name exists
            if f"{package}.{name}" not in registered:
                yield f"{package}.{name}"


# The public modules 0.2.0 moved into the domain sub-packages: each old path is a shim until 0.3.0
# (ranklit._deprecation.moved_module; tests/test_moved_modules.py).
MOVED_MODULES = (
    ("ranklit.functional.binary_metrics", "ranklit.functional.metrics.binary"),
    ("ranklit.functional.hyperparameters", "ranklit.functional.losses.hyperparameters"),
    ("ranklit.functional.loss_utils", "ranklit.functional.losses.contract"),
    ("ranklit.functional.metric_engine", "ranklit.functional.metrics.engine"),
    ("ranklit.functional.precision", "ranklit.functional.floating_point"),
    ("ranklit.data.decoding", "ranklit.data.images.decoding"),
    ("ranklit.data.preprocess", "ranklit.data.images.preprocess"),
    ("ranklit.data.sampler_base", "ranklit.data.samplers.base"),
    ("ranklit.data.transforms", "ranklit.data.images.transforms"),
)

# The modules whose names are public besides the packages' own: the extension points the API pages document
# (CONTRIBUTING "The public API and deprecations"). Every other module starts with `_`.
PUBLIC_MODULES = {
    "ranklit.errors",
    "ranklit.functional.reducers",
    "ranklit.functional.metrics.binary",
    "ranklit.functional.losses.hyperparameters",
    "ranklit.functional.metrics.engine",
    "ranklit.functional.floating_point",
    "ranklit.functional.inputs",
    "ranklit.functional.losses.contract",
    "ranklit.functional.ranking",
    "ranklit.functional.relevance",
    "ranklit.functional.sample_ids",
    "ranklit.functional.ties",
    "ranklit.losses.base",
    "ranklit.data.images.decoding",
    "ranklit.data.inspection",
    "ranklit.data.images.preprocess",
    "ranklit.data.samplers.base",
    "ranklit.data.images.transforms",
    "ranklit.data.datasets.base",
    "ranklit.data.datasets.validation",
    "ranklit.index.descriptors",
    "ranklit.index.neighbours",
    "ranklit.landmarks.ground_truth",
    "ranklit.landmarks.postprocess",
    "ranklit.training.stops",
    *(old for old, _ in MOVED_MODULES),
}


def test_every_other_module_is_internal() -> None:
    root = SNAPSHOT.parent.parent
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts)
        for path in (root / "ranklit").rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    public = {m for m in modules if not any(part.startswith("_") for part in m.split("."))}
    assert public == PUBLIC_MODULES, "a module is public (no `_`) without being a documented extension point"


def test_the_public_names_are_the_snapshot() -> None:
    actual, expected = list(public_names()), SNAPSHOT.read_text().split()
    diff = "\n".join(difflib.unified_diff(expected, actual, "tests/public_api.txt", "the packages", lineterm=""))
    assert actual == expected, (
        f"The public API changed:\n{diff}\nIf this is intended, run `python -m tests.test_public_api > "
        "tests/public_api.txt` and add a CHANGELOG.md line."
    )


if __name__ == "__main__":
    print("\n".join(public_names()))  # noqa: T201


def test_registered_classes_report_their_public_module() -> None:
    """A pickled loss or metric, a printed config's ``class_path``, name ``ranklit.losses.X`` / ``ranklit.metrics.X``,
    never the private module that defines it."""
    import pickle

    import torch

    from ranklit.losses import create_loss, list_losses
    from ranklit.metrics import RetrievalMetrics, list_metrics

    for package, names in (("ranklit.losses", list_losses()), ("ranklit.metrics", list_metrics())):
        module = importlib.import_module(package)
        for name in names:
            assert getattr(module, name).__module__ == package, name
    loss = create_loss("SupAPLoss")
    data = pickle.dumps(loss)
    assert b"\x0eranklit.losses\x94\x8c\tSupAPLoss" in data, data[:80]  # the class by its public path
    assert b"ranklit.losses._" not in data
    assert type(pickle.loads(data)) is type(loss)
    metric = RetrievalMetrics()
    metric.update(torch.eye(4), torch.tensor([0, 0, 1, 1]))
    again = pickle.loads(pickle.dumps(metric))
    assert type(again) is RetrievalMetrics and b"ranklit.metrics._" not in pickle.dumps(metric)
