"""``python -m ranklit.cli`` is the ``ranklit`` console script (its help and errors say ``ranklit``)."""

import sys

from ranklit.cli import main

sys.argv[0] = "ranklit"
main()
