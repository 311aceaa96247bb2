"""Messages that stopped before the useful part (issue 40, "smaller things that mislead"): a ranklit class named by
its old path, a network that cannot be built, an option of another command in a run's saved config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from ranklit.deploy._model import _build_net
from ranklit.errors import UserError


def test_a_class_named_by_its_old_path_is_one_line_with_the_new_path(tmp_path: Path, capsys) -> None:
    old = {"trainer": {"callbacks": [{"class_path": "ranklit.models.RankingGridLogger",
                                      "init_args": {"num_queries": 4}}]}}
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", "quickstart.yaml", "--config", str(tmp_path / "old.yaml"), "--print_config"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert stop.value.code == 2 and len(errors) == 1, errors
    assert "'ranklit.models.RankingGridLogger' has moved" in errors[0]
    assert "it is 'ranklit.callbacks.RankingGridLogger' now" in errors[0] and "`trainer.callbacks`" in errors[0]


@pytest.mark.parametrize(
    ("init_args", "reason"),
    [
        ({"embedding_dim": "abc"}, "`embedding_dim`: Expected a <class 'int'>. Got value: abc"),
        ({"nonsense": 1}, "Option 'nonsense' is not accepted"),
        ({"backbone": "no_such_backbone"}, "Unknown timm backbone 'no_such_backbone'"),
    ],
)
def test_a_network_that_cannot_be_built_says_why(init_args: dict, reason: str) -> None:
    net = {"class_path": "ranklit.models.EmbeddingNet", "init_args": {"backbone": "test_resnet", **init_args}}
    with pytest.raises(UserError) as refused:
        _build_net(net, Path("run/config.yaml"))
    assert f"run/config.yaml: `model.net` cannot be built: {reason}" in str(refused.value), str(refused.value)


def test_a_test_runs_config_given_to_predict_says_where_verbose_comes_from(tmp_path: Path, capsys) -> None:
    (tmp_path / "test_run.yaml").write_text("verbose: true\n")  # what `ranklit test` saves in its run's config.yaml
    with pytest.raises(SystemExit) as stop:
        main(["predict", "--config", "quickstart.yaml", "--config", str(tmp_path / "test_run.yaml"), "--print_config"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert stop.value.code == 2 and len(errors) == 1, errors
    assert "an option of `ranklit test` and `ranklit validate` only" in errors[0]
    assert "delete its `verbose:` line" in errors[0]
