"""The report channel's loader, shipped as sitecustomize.py next to the plugin
(sandbox.verdict_channel), so every Python that has the plugin's directory on its path imports
it at startup. In a process that runs pytest it opens the channel at once, before pytest reads
any configuration or imports a module of the agent's: the run's key is read and destroyed, the
process made non-dumpable and the first record written (the plugin file loaded under another
name, `t1_verdict_early`; the plugin takes the opened channel over when pytest configures it).
A pytest that the agent's project configuration keeps from loading the plugin (`-p
no:t1_verdict`) then leaves records that never close: a failed attempt, not a report read from
files. It also names the plugin in PYTEST_PLUGINS, for a pytest that does not load plugins by
entry point (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, as LiveCodeBench Pro's verifiers set; the plugin
takes it out again, so that no child inherits a module it may not find). In a pytest process
it first guards the judge (the plugin's `guard_imports`, `guard_pytest_config`: no module,
conftest or configuration file of the agent's stands in for the image's). Then it hands over
to the image's own sitecustomize, if any, never to one of the agent's. In a program of the
task's that a runner started (a validator in the held-out tests directory) it guards the same
way: what that program starts is the agent's. Stdlib only, Python 3.6.
"""

import os
import sys


def _runs_pytest():
    argv = list(getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or [])
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1] in ("pytest", "py.test")
    names = [os.path.basename(a) for a in argv[:2]]
    return any(n.startswith(("pytest", "py.test")) for n in names)


def _informs_only():
    """pytest asked for its version or help: it runs no test and must not take the key."""
    argv = list(getattr(sys, "argv", None) or [])
    return any(a in ("--version", "-V", "--help", "-h") for a in argv[1:])


def _early_module():
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t1_verdict.py")
    spec = importlib.util.spec_from_file_location("t1_verdict_early", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["t1_verdict_early"] = module
    return module


def _open_early():
    try:
        module = _early_module()
    except Exception:  # noqa: BLE001 - no channel: the plugin opens it when pytest configures
        return
    if module is None:
        return
    module.guard_imports()
    try:
        module.guard_pytest_config()
    except Exception:  # noqa: BLE001 - a pytest this guard does not know: unguarded config
        pass
    if not _informs_only():
        try:
            module.open_early()
        except Exception:  # noqa: BLE001 - no channel: the plugin opens it when configured
            pass


def _agents(path):
    """As the plugin's `agents`: owned by neither root nor this process's user."""
    if not os.environ.get("T1_AGENT_IDS"):
        return False
    try:
        return os.stat(path).st_uid not in (0, os.getuid())
    except OSError:
        return False


def _hand_over():
    """Import the next sitecustomize on the path, unless it is the agent's."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    origin = getattr(spec, "origin", None)
    if spec is None or not origin or _agents(origin):
        return
    del sys.modules["sitecustomize"]
    saved = sys.path[:]
    sys.path[:] = rest
    try:
        import sitecustomize  # noqa: F401 - the image's own
    except ImportError:
        pass
    finally:
        sys.path[:] = saved


def _task_program():
    """This process is a program of the task's that a test runner started (its script lies in
    the held-out tests directory: a validator shipped beside the tests, which may read them):
    what it starts is the agent's, as what the runner starts is, and no module of the agent's
    stands in for the image's."""
    held = os.environ.get("T1_HELD_OUT", "")
    argv = list(getattr(sys, "argv", None) or [])
    if not held or not os.environ.get("T1_VERDICT_NESTED") or not argv or not argv[0]:
        return False
    main = os.path.realpath(argv[0])
    return main.startswith(held.rstrip("/") + "/")


def _guard_task_program():
    """Fail closed: a program of the task's that cannot make its children the agent's does
    not run."""
    try:
        module = _early_module()
        module.guard_imports()
        module.guard_programs()
    except Exception as e:  # noqa: BLE001 - any failure: not run
        sys.stderr.write(f"t1: {sys.argv[0]}: its programs cannot be made the agent's: {e}\n")
        os._exit(126)


if _task_program():
    _guard_task_program()
elif _runs_pytest():
    _plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p]
    if "t1_verdict" not in _plugins:
        os.environ["PYTEST_PLUGINS"] = ",".join(["t1_verdict"] + _plugins)
    _open_early()

_hand_over()
