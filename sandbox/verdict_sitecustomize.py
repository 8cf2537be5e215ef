"""The report channel's loader for a pytest that does not load plugins by entry point
(PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, as LiveCodeBench Pro's verifiers set): shipped as
sitecustomize.py next to the plugin (sandbox.verdict_channel), so every Python that has the
plugin's directory on its path imports it at startup. In a process that runs pytest it names
the plugin in PYTEST_PLUGINS (the plugin takes it out again, so that no child inherits a
module it may not find); then it hands over to the image's own sitecustomize, if any.
Stdlib only, Python 3.6.
"""

import os
import sys


def _runs_pytest():
    argv = list(getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or [])
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1] in ("pytest", "py.test")
    names = [os.path.basename(a) for a in argv[:2]]
    return any(n.startswith(("pytest", "py.test")) for n in names)


if _runs_pytest():
    _plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p]
    if "t1_verdict" not in _plugins:
        os.environ["PYTEST_PLUGINS"] = ",".join(["t1_verdict"] + _plugins)

_here = os.path.dirname(os.path.abspath(__file__))
_saved = sys.path[:]
del sys.modules["sitecustomize"]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401 - the image's own, if it has one
except ImportError:
    pass
finally:
    sys.path[:] = _saved
