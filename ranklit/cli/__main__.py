"""``python -m ranklit.cli`` is the ``ranklit`` console script."""

from ranklit.cli.app import main

main()
