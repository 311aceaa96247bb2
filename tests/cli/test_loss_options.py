"""Options a loss takes as ``**options`` (defined once in a dataclass) stay visible to the CLI: listed by
``--print_config`` with their defaults, and a misspelt key refused at parse time."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import yaml

from ranklit.cli import main
from ranklit.functional import HAPOptions, SupAPOptions


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
    """ROADMAPLoss passes its SupAP options on to ``SupAPLoss(**options)`` then ``SupAPOptions(**options)``: the CLI
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
