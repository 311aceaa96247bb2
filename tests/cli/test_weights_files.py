"""``ranklit fit --model.net.init_args.weights FILE`` with a wrong file: one error line naming the file, exit 2."""

from __future__ import annotations

from pathlib import Path

import timm
import torch

from tests.cli.cli_cases import drive

_FIT = ["fit", "--config", "quickstart.yaml", "--model.net.init_args.backbone=test_resnet", "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false"]


def _error_line(result: dict) -> str:
    lines = [line for line in result["stderr"].splitlines() if line.strip() and line != "Seed set to 0"]
    assert result["returncode"] == 2 and len(lines) == 1 and lines[0].startswith("error: "), result
    return lines[0]


def test_a_wrong_weights_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = timm.create_model("test_resnet").state_dict()
    torch.save(state, tmp_path / "good.pth")
    (tmp_path / "notes.txt").write_text("the weights are on the shared drive\n")
    (tmp_path / "cut.pth").write_bytes((tmp_path / "good.pth").read_bytes()[:4000])
    torch.save([1, 2, 3], tmp_path / "list.pth")
    torch.save(timm.create_model("test_vit").state_dict(), tmp_path / "vit.pth")
    reshaped = {**state, "conv1.0.weight": torch.zeros(8, 3, 3, 3)}
    torch.save(reshaped, tmp_path / "reshaped.pth")
    files = ["notes.txt", "cut.pth", "list.pth", "vit.pth", "reshaped.pth", "absent.pth"]
    cases = [[*_FIT, f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}",
              f"--model.net.init_args.weights={tmp_path / name}"] for name in files]
    cases.append([*cases[0][:-1], f"--model.net.init_args.weights={tmp_path / 'good.pth'}",
                  "--model.net.init_args.pretrained=true"])
    text, cut, listed, vit, shape, absent, both = (_error_line(r) for r in drive(cases, tmp_path))
    for line, name in zip((text, cut, listed, vit, shape, absent), files, strict=True):
        assert f"`model.net.init_args.weights` {tmp_path / name}" in line or f"{tmp_path / name} not found" in line
    assert "neither a torch file nor a safetensors file: it begins with b'the weigh" in text
    assert "cannot be read as a checkpoint" in cut and "truncated or damaged?" in cut
    assert "not a state dict (a list, not a dict of tensors)" in listed
    assert "none of its" in vit and "another architecture?" in vit
    assert "1 of another shape (`conv1.0.weight`: file [8, 3, 3, 3] vs backbone [16, 3, 3, 3])" in shape
    assert "not found" in absent
    assert "`pretrained: true` and `weights: " in both and "both choose the backbone's initial weights" in both
    assert not (tmp_path / "runs").exists()  # refused before the run started
