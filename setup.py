"""Packaging beside pyproject.toml: the repository's top-level ``configs/`` ships inside the wheel as
``ranklit/configs`` (``ranklit.cli._config_files.config_dir`` finds them there after ``pip install ranklit``)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["ranklit*"]), "ranklit.configs"],
    package_dir={"ranklit.configs": "configs"},
)
