"""A loss's hyper-parameters are explicit keywords (validated by one dataclass) that the CLI sees: listed by
``--print_config`` with their defaults, and a misspelt key refused at parse time."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from ranklit.functional import HAPOptions, SupAPOptions
from tests.cli.cli_cases import drive


def test_happier_lists_every_hap_option_and_refuses_a_misspelt_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "happier_sop.yaml", "--model.loss.init_args.with_hrank=false", "--print_config"])
    assert exit_info.value.code in (0, None)
    init_args = yaml.safe_load(capsys.readouterr().out)["model"]["loss"]["init_args"]
    expected = {**asdict(HAPOptions()), "with_hrank": False, "normalize": True, "include_self": False}
    assert {key: init_args.get(key, "missing") for key in expected} == expected
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "happier_sop.yaml", "--model.loss.init_args.gama=0.3", "--print_config"])
    assert exit_info.value.code != 0
    assert "'gama' is not accepted" in capsys.readouterr().err


def test_roadmap_lists_every_supap_option_and_refuses_a_misspelt_one(capsys: pytest.CaptureFixture[str]) -> None:
    """ROADMAPLoss takes its SupAP term's options as explicit keywords (passed to ``SupAPLoss``): the CLI
    still lists each one (with the config's values) and refuses a misspelt key."""
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "roadmap_inat.yaml", "--model.loss.init_args.offset=1.0", "--print_config"])
    assert exit_info.value.code in (0, None)
    init_args = yaml.safe_load(capsys.readouterr().out)["model"]["loss"]["init_args"]
    expected = {**asdict(SupAPOptions()), "offset": 1.0, "alpha": 0.9, "beta": 0.6, "lam": 0.5, "include_self": False}
    assert {key: init_args.get(key, "missing") for key in expected} == expected
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "roadmap_inat.yaml", "--model.loss.init_args.tua=0.3", "--print_config"])
    assert exit_info.value.code != 0
    assert "'tua' is not accepted" in capsys.readouterr().err


def test_the_reducer_is_listed_and_a_bad_one_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``reducer`` is an explicit keyword of every ranking loss: ``--print_config`` shows it (here in the listwise
    config, which asks for the class-balanced mean of the paper), and an unknown name stops the ``ranklit`` command
    in one line with exit code 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "listwise_ap_landmarks.yaml", "--print_config"])
    assert exit_info.value.code in (0, None)
    init_args = yaml.safe_load(capsys.readouterr().out)["model"]["loss"]["init_args"]
    assert init_args["reducer"] == "class_balanced" and "class_balanced" not in set(init_args) - {"reducer"}
    (result,) = drive([["fit", "--config", "quickstart.yaml", "--model.loss.init_args.reducer=median",
                        f"--trainer.default_root_dir={tmp_path}"]], tmp_path)
    assert result["returncode"] == 2, result["stderr"]
    assert result["stderr"].strip().splitlines()[-1] == (
        "error: `reducer` must be one of ('mean', 'class_balanced', 'active', 'none') or a "
        "ranklit.functional.Reducer, got 'median'."
    )
    assert "Traceback" not in result["stderr"]
