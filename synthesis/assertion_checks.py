"""Static checks of new test functions: assertions that cannot fail, and checks whose outcome
depends on chance or the clock.

Both run before any sandbox time is spent (`synthesis.validate`), each naming the offending
test functions. They are the static half of two checks with a dynamic half: a new assertion
that passes both with nothing done and with the working directory wiped is vacuous too, and N
oracle runs that disagree are flaky too. docs/synthesis.md lists the forms each half catches
and the ones neither does.

Vacuous: a test is vacuous when it has assertions and every one of them is (a) a constant that
is true (`assert True`, `assert "ok"`, `assert 1`), (b) a comparison of an expression with
itself (`x == x`, `sorted(a) <= sorted(a)`), (c) a comparison of constants that holds
(`2 + 2 == 4`), (d) `len(...) >= 0`, `... or True`, `not <false constant>`, or (e) inside a
`try` whose handler swallows the failure; or when it has no assertion and calls nothing (a body
of `pass`, docstrings and assignments of constants).

Nondeterministic: the module-level `random` functions and an unseeded `random.Random()`,
`random.SystemRandom`, `secrets`, `uuid.uuid1/uuid4`, `os.urandom`, `os.getpid/getppid`,
`hash()` (string hashing is salted per process), `id()`, the wall clock (`time.time`,
`time.time_ns`, `datetime.now/utcnow/today`, `date.today`), any clock reading taken modulo
something, and reading `/dev/urandom`, `/dev/random` or `/proc/uptime`. Elapsed-time budgets
(`time.monotonic() - t0 <= budget`) are allowed: they are performance requirements.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from typing import Any

from tasks.literals.python import compile_ast, parse_python

_RANDOM_FNS = frozenset(
    "random randint randrange choice choices shuffle sample uniform getrandbits gauss "
    "normalvariate triangular betavariate expovariate randbytes".split()
)
_CLOCK_ATTRS = frozenset(
    {"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns"}
)
_WALL_CLOCK = frozenset({("time", "time"), ("time", "time_ns")})
_NONDET_CALLS = frozenset(
    {("os", "urandom"), ("os", "getpid"), ("os", "getppid"), ("uuid", "uuid1"), ("uuid", "uuid4")}
)
_NOW = frozenset({"now", "utcnow", "today"})
_NOISE_FILES = ("/dev/urandom", "/dev/random", "/proc/uptime")
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], object]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def top_level_tests(source: str, names: Iterable[str] | None = None) -> list[ast.FunctionDef]:
    """Top-level test functions of `source` (those in `names`, when given)."""
    wanted = set(names) if names is not None else None
    return [
        n
        for n in parse_python(source).body
        if isinstance(n, ast.FunctionDef)
        and n.name.startswith("test_")
        and (wanted is None or n.name in wanted)
    ]


def _const_value(node: ast.expr) -> tuple[bool, Any]:
    """(True, value) when `node` folds to a constant (literals and arithmetic on them)."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.BinOp):
        ok_l, left = _const_value(node.left)
        ok_r, right = _const_value(node.right)
        if ok_l and ok_r:
            expr = ast.Expression(ast.BinOp(ast.Constant(left), node.op, ast.Constant(right)))
            try:
                code = compile_ast(ast.fix_missing_locations(expr), "<constant>", "eval")
                return True, eval(code, {"__builtins__": {}})  # noqa: S307 - constants only
            except Exception:  # noqa: BLE001 - e.g. 1 / 0: not a constant truth
                return False, None
    return False, None


def _always_true(test: ast.expr) -> bool:
    ok, value = _const_value(test)
    if ok:
        return bool(value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        ok, value = _const_value(test.operand)
        return ok and not value
    if isinstance(test, ast.BoolOp):
        parts = [_always_true(v) for v in test.values]
        return any(parts) if isinstance(test.op, ast.Or) else all(parts)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if ast.dump(left) == ast.dump(right) and isinstance(
            op, ast.Eq | ast.LtE | ast.GtE | ast.Is | ast.In
        ):
            return not isinstance(op, ast.In) or isinstance(right, ast.List | ast.Tuple)
        ok_l, lv = _const_value(left)
        ok_r, rv = _const_value(right)
        if ok_l and ok_r and type(op) in _COMPARE:
            try:
                return bool(_COMPARE[type(op)](lv, rv))
            except TypeError:
                return False
        # len(anything) >= 0, len(anything) > -1
        is_len = isinstance(left, ast.Call) and getattr(left.func, "id", "") == "len"
        if is_len and ok_r and isinstance(rv, int | float):
            return (isinstance(op, ast.GtE) and rv <= 0) or (isinstance(op, ast.Gt) and rv < 0)
    if isinstance(test, ast.Call) and getattr(test.func, "id", "") == "isinstance":
        return bool(test.args) and _const_value(test.args[0])[0]
    return False


def _swallowed(assert_node: ast.Assert, fn: ast.FunctionDef) -> bool:
    """The assert sits in a `try` whose handler catches its failure and does not re-raise."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Try):
            continue
        if not any(a is assert_node for b in node.body for a in ast.walk(b)):
            continue
        for h in node.handlers:
            names = {
                getattr(e, "id", getattr(e, "attr", ""))
                for e in ([h.type] if not isinstance(h.type, ast.Tuple) else h.type.elts)
                if e is not None
            }
            catches = h.type is None or names & {"AssertionError", "Exception", "BaseException"}
            reraises = any(isinstance(s, ast.Raise) for s in ast.walk(h))
            if catches and not reraises:
                return True
    return False


def _calls_only_guard(fn: ast.FunctionDef) -> bool:
    """No call in the body other than the prerequisite guard (`_rN_prerequisites()`)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", "")
            if not (name.startswith("_r") and name.endswith("_prerequisites")):
                return False
    return True


def vacuous_tests(source: str, names: Iterable[str] | None = None) -> list[str]:
    """Names of test functions that cannot fail (see the module docstring)."""
    out = []
    for fn in top_level_tests(source, names):
        asserts = [n for n in ast.walk(fn) if isinstance(n, ast.Assert)]
        if not asserts:
            if _calls_only_guard(fn):
                out.append(fn.name)
            continue
        if all(_always_true(a.test) or _swallowed(a, fn) for a in asserts):
            out.append(fn.name)
    return out


def _dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _nondeterministic_call(call: ast.Call) -> bool:
    path = _dotted(call.func)
    if not path:
        return False
    if path[0] == "random" and len(path) == 2:
        if path[1] in _RANDOM_FNS or path[1] == "SystemRandom":
            return True
        if path[1] == "Random":
            return not call.args and not call.keywords
    if path[0] == "secrets" or path[-2:] in _NONDET_CALLS or path[-2:] in _WALL_CLOCK:
        return True
    if path[-1] in _NOW and any(p in ("datetime", "date") for p in path[:-1]):
        return True
    return path in (("hash",), ("id",))


def _is_clock(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and len(_dotted(node.func)) == 2
        and _dotted(node.func)[0] == "time"
        and _dotted(node.func)[1] in _CLOCK_ATTRS
    )


def nondeterministic_tests(source: str, names: Iterable[str] | None = None) -> list[str]:
    """Names of test functions whose outcome depends on chance or the clock."""
    tree = parse_python(source)
    helpers = {
        n.name: n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("test_")
    }
    out = []
    for fn in top_level_tests(source, names):
        reach = [fn]
        seen = {fn.name}
        for node in ast.walk(fn):  # one level of module helpers the test calls
            name = getattr(node, "id", None)
            if isinstance(node, ast.Name) and name in helpers and name not in seen:
                seen.add(name)
                reach.append(helpers[name])
        bad = False
        for body in reach:
            for node in ast.walk(body):
                if isinstance(node, ast.Call) and _nondeterministic_call(node):
                    bad = True
                elif (
                    isinstance(node, ast.BinOp)
                    and isinstance(node.op, ast.Mod)
                    and (_is_clock(node.left) or _is_clock(node.right))
                ):
                    bad = True
                elif isinstance(node, ast.Constant) and node.value in _NOISE_FILES:
                    bad = True
        if bad:
            out.append(fn.name)
    return out
