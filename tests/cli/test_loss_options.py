"""Options a loss takes as ``**options`` (defined once in a dataclass) stay visible to the CLI: listed by
``--print_config`` with their defaults, and a misspelt key refused at parse time."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import yaml

from ranklit.cli import main
from ranklit.functional import HAPOptions


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
