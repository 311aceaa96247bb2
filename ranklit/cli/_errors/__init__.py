"""What the ``ranklit`` command prints when something fails: one place for the error surface.

- ``_surface`` — the user's mistakes as a few lines and exit 2, before, while and after parsing;
- ``_causes`` — the one line for an exception whose fix is the user's (through its chain, from loader workers too);
- ``_parser_messages`` — jsonargparse's parse errors that hide their useful part, as one line that says it.
"""
