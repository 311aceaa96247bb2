"""The suite's collection: the shims left at the old paths of moved modules are not imported as doctest modules
(importing one warns, which the suite's settings make an error; their behaviour is tests/test_moved_modules.py)."""

from tests.test_public_api import MOVED_MODULES

collect_ignore = [old.replace(".", "/") + ".py" for old, _ in MOVED_MODULES]
