"""Literals of Python tests, by AST (see `tasks.literals`): positive comparisons in asserts,
returns, check calls and failing `if` conditions; keys; paths; constants folded."""

from __future__ import annotations

import ast
import posixpath
import re
import threading
from dataclasses import dataclass
from types import CodeType

from tasks.literals.conventions import python_conventions
from tasks.literals.model import (
    HOLE,
    IDENT_RE,
    NUM_TOKEN,
    Collector,
    Literal,
    LiteralKind,
    clean_path,
    is_path,
    is_system,
    string_kind,
)

FAIL_CALLS = frozenset({"fail", "exit", "_exit", "abort", "skip"})
# `requests.get(url)` is a request, not a dict lookup.
_HTTP_CLIENTS = frozenset({"requests", "httpx", "session", "client", "s", "http", "urllib3"})


class _Resolver:
    """Constant folding for strings and constant lists: names, f-strings, joins."""

    def __init__(self, tree: ast.AST) -> None:
        self.consts: dict[str, ast.AST] = {}
        counts: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                t = node.targets[0]
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
                    self.consts.setdefault(t.id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    counts[node.target.id] = counts.get(node.target.id, 0) + 1
                    self.consts.setdefault(node.target.id, node.value)
        # A name bound more than once is a variable, not a constant.
        self.consts = {k: v for k, v in self.consts.items() if counts.get(k) == 1}

    def string(self, node: ast.AST, depth: int = 0) -> str | None:
        if depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.consts:
            return self.string(self.consts[node.id], depth + 1)
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    out.append(self.string(v.value, depth + 1) or HOLE)
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Div):
            left = self.string(node.left, depth + 1)
            right = self.string(node.right, depth + 1)
            if left is None or right is None:
                return None
            return posixpath.join(left, right) if isinstance(node.op, ast.Div) else left + right
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("Path", "PurePosixPath") and node.args:
                parts = [self.string(a, depth + 1) for a in node.args]
                if all(p is not None for p in parts):
                    return posixpath.join(*parts)  # type: ignore[arg-type]
            if name == "join" and isinstance(fn, ast.Attribute) and node.args:
                if isinstance(fn.value, ast.Constant):  # ", ".join([...]): a string join
                    elts = self.elements(node.args[0], depth + 1)
                    if elts and all(isinstance(e, str) for e in elts):
                        return str(fn.value.value).join(elts)  # type: ignore[arg-type]
                    return None
                parts = [self.string(a, depth + 1) for a in node.args]
                if all(p is not None for p in parts):
                    return posixpath.join(*parts)  # type: ignore[arg-type]
            if name in ("str", "strip", "rstrip", "lstrip") and isinstance(fn, ast.Attribute):
                return self.string(fn.value, depth + 1)
        return None

    def number(self, node: ast.AST, depth: int = 0) -> float | int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return None if isinstance(node.value, bool) else node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            n = self.number(node.operand, depth + 1)
            return -n if n is not None else None
        if isinstance(node, ast.Name) and node.id in self.consts and depth < 8:
            return self.number(self.consts[node.id], depth + 1)
        if isinstance(node, ast.Call) and node.args:  # pytest.approx(x), float(x)
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("approx", "float", "int", "Decimal"):
                return self.number(node.args[0], depth + 1)
        return None

    def elements(self, node: ast.AST, depth: int = 0) -> list[str | float | int] | None:
        """The constant members of a list/tuple/set (or a name bound to one)."""
        if isinstance(node, ast.Name) and node.id in self.consts and depth < 8:
            return self.elements(self.consts[node.id], depth + 1)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
            "set",
            "frozenset",
            "list",
            "tuple",
            "sorted",
        ):
            return self.elements(node.args[0], depth + 1) if node.args else None
        if not isinstance(node, ast.List | ast.Tuple | ast.Set):
            return None
        out: list[str | float | int] = []
        for e in node.elts:
            s = self.string(e, depth + 1)
            n = self.number(e, depth + 1) if s is None else None
            if s is not None:
                out.append(s)
            elif n is not None:
                out.append(n)
            elif isinstance(e, ast.List | ast.Tuple):
                sub = self.elements(e, depth + 1)
                if sub is None:
                    return None
                out.extend(sub)
            else:
                return None
        return out


_PARSE = threading.Lock()


def parse_python(text: str) -> ast.Module:
    """`ast.parse`, one thread at a time: CPython 3.11.7 parsing in two threads at once can
    raise SystemError ("AST constructor recursion depth mismatch", fixed in 3.11.8). Every
    parse of ours goes through here (the audit and synthesis parse in thread pools)."""
    with _PARSE:
        return ast.parse(text)


def parse_expression(text: str) -> ast.Expression:
    """`ast.parse(text, mode="eval")` under the same lock."""
    with _PARSE:
        return ast.parse(text, mode="eval")


def compile_ast(node: ast.Expression | ast.Module, filename: str, mode: str) -> CodeType:
    """`compile` of an AST, under the same lock (it converts the tree the same way)."""
    with _PARSE:
        return compile(node, filename, mode)


def imported_module(node: ast.AST) -> str:
    """`__import__("random")` (or importlib.import_module) names the module `random`."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if name in ("__import__", "import_module"):
            return str(node.args[0].value)
    return ""


def _owner(node: ast.AST) -> str:
    """The name a method is called on: `re` in `re.match(...)` and in
    `__import__("re").match(...)` alike."""
    return node.id if isinstance(node, ast.Name) else imported_module(node)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    out: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out


def _body_fails(body: list[ast.stmt]) -> bool:
    """An `if` body that fails the check: raise, pytest.fail, sys.exit, `return False`."""
    for st in body:
        if isinstance(st, ast.Raise):
            return True
        if isinstance(st, ast.Return) and isinstance(st.value, ast.Constant):
            return st.value.value is False
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            fn = st.value.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in FAIL_CALLS:
                return True
    return False


@dataclass
class _Ctx:
    asserted: bool
    negated: bool
    alternatives: tuple[int, int, int] | None  # an enclosing `or`: (id, operand, operands)


def _context(node: ast.AST, parents: dict[int, ast.AST]) -> _Ctx:
    """Is `node` (a comparison or check call) something the verifier asserts, and with what
    polarity? Comparisons steering the verifier's own control flow are not assertions."""
    negated = False
    alternatives = None
    child, cur = node, parents.get(id(node))
    while cur is not None:
        if isinstance(cur, ast.UnaryOp) and isinstance(cur.op, ast.Not):
            negated = not negated
        elif isinstance(cur, ast.BoolOp) and isinstance(cur.op, ast.Or) and alternatives is None:
            operand = next(i for i, v in enumerate(cur.values) if v is child)
            alternatives = (id(cur), operand, len(cur.values))
        elif isinstance(cur, ast.Assert):
            return _Ctx(child is cur.test, negated, alternatives)
        elif isinstance(cur, ast.If | ast.While | ast.IfExp):
            if child is cur.test:
                fails = isinstance(cur, ast.If) and _body_fails(cur.body)
                return _Ctx(fails, not negated, alternatives)
            return _Ctx(not isinstance(cur, ast.IfExp), negated, alternatives)
        elif isinstance(cur, ast.comprehension):
            return _Ctx(False, negated, alternatives)
        elif isinstance(cur, ast.stmt):
            return _Ctx(True, negated, alternatives)
        child, cur = cur, parents.get(id(cur))
    return _Ctx(True, negated, alternatives)


_OUTPUT_FLAGS = ("-o", "--output", "--out", "--outfile")


def _own_paths_and_strings(tree: ast.AST, res: _Resolver) -> tuple[set[str], set[str]]:
    """Paths the verifier writes itself, and strings it writes (it may read them back)."""
    paths: set[str] = set()
    strings: set[str] = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        fn = n.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if name == "open" and len(n.args) >= 2:
            mode = res.string(n.args[1]) or ""
            if any(c in mode for c in "wax"):
                p = res.string(n.args[0])
                if p:
                    paths.add(clean_path(p))
        elif name in ("write_text", "write_bytes", "mkdir", "touch") and isinstance(
            fn, ast.Attribute
        ):
            p = res.string(fn.value)
            if p:
                paths.add(clean_path(p))
            if name == "write_text" and n.args:
                s = res.string(n.args[0])
                if s:
                    strings.add(s)
        elif name in ("makedirs", "mkdtemp", "copy", "copyfile", "copytree", "mkstemp"):
            target = n.args[-1] if name.startswith("copy") and n.args else None
            if name == "makedirs" and n.args:
                target = n.args[0]
            p = res.string(target) if target is not None else None
            if p:
                paths.add(clean_path(p))
        elif name in ("write", "writelines") and n.args:
            s = res.string(n.args[0])
            if s:
                strings.add(s)
    for n in ast.walk(tree):  # a program's output the verifier names: `cc -o /tmp/t ...`
        if isinstance(n, ast.List | ast.Tuple):
            argv = [res.string(e) or "" for e in n.elts]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            argv = n.value.split()
        else:
            continue
        for flag, arg in zip(argv, argv[1:], strict=False):
            if flag in _OUTPUT_FLAGS and arg.startswith("/"):
                paths.add(clean_path(arg))
    return paths, strings


def _helper_arg_paths(tree: ast.AST, res: _Resolver) -> set[str]:
    """Paths the verifier hands to its own program-running helpers (a function of the
    verifier that calls subprocess/os.system, directly or through another helper): where it
    asks a program to work (a scratch prefix, a DESTDIR), not an output it demands."""
    calls: dict[str, set[str]] = {}
    runners: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        calls[fn.name] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                owner = getattr(n.func.value, "id", "")
                if owner == "subprocess" or (owner, n.func.attr) == ("os", "system"):
                    runners.add(fn.name)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                calls[fn.name].add(n.func.id)
    grown = True
    while grown:
        new = {f for f, callees in calls.items() if callees & runners} - runners
        runners |= new
        grown = bool(new)
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) in runners:
            for a in [*n.args, *(k.value for k in n.keywords)]:
                p = res.string(a)
                if p is not None and is_path(p):
                    out.add(clean_path(p))
    return out


def _guarded_keys(tree: ast.AST, res: _Resolver) -> set[str]:
    """Keys read only under `if "k" in d:`: optional, not demanded."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.IfExp):
            for c in ast.walk(node.test):
                if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.In):
                    k = res.string(c.left)
                    if k is not None:
                        out.add(k)
    return out


def _own_keys(tree: ast.AST) -> set[str]:
    """Keys of dicts the verifier builds itself (literal dicts, subscript stores)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out.add(k.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                out.add(node.slice.value)
    return out


class _PythonReader:
    def __init__(self, name: str, text: str, out: Collector) -> None:
        self.name, self.out = name, out
        self.tree = parse_python(text)
        self.res = _Resolver(self.tree)
        self.parents = _parents(self.tree)
        self.own_paths, self.own_strings = _own_paths_and_strings(self.tree, self.res)
        self.own_keys = _own_keys(self.tree)
        self.own_paths |= _helper_arg_paths(self.tree, self.res)
        self.optional_keys = _guarded_keys(self.tree, self.res)
        self.groups: dict[int, int] = {}
        self.form_checks: set[int] = set()
        # per `or`: its operand count and the operands that asserted a literal
        self.operands: dict[int, tuple[int, set[int]]] = {}

    def _group(self, ctx: _Ctx) -> int | None:
        if ctx.alternatives is None:
            return None
        return self.groups.setdefault(ctx.alternatives[0], self.out.group())

    def _asserted_literals(self, node: ast.AST) -> None:
        """Note that `node` asserted a literal (for `_drop_optional_alternatives`)."""
        alternatives = _context(node, self.parents).alternatives
        if alternatives is not None:
            node_id, operand, count = alternatives
            self.operands.setdefault(node_id, (count, set()))[1].add(operand)

    def _drop_optional_alternatives(self) -> None:
        """`assert "&" not in url or "://" in url`: an operand of an `or` that asserts no
        literal satisfies it without any, so the literals of the others are not demanded."""
        for node, (count, asserted) in self.operands.items():
            group = self.groups.get(node)  # None: its literals were not alternatives (a key)
            if group is not None and len(asserted) < count:
                self.out.drop_group(group)

    def add_value(
        self,
        value: str | float | int,
        line: int,
        group: int | None,
        kind: LiteralKind | None = None,
        ignore_case: bool = False,
    ) -> None:
        if isinstance(value, int | float):
            if abs(value) <= 1:  # 0/1/-1: exit codes, emptiness, "exactly one"
                return
            text = repr(value)
            self.out.add(Literal(text, LiteralKind.NUMBER, self.name, line, group))
            return
        if value in self.own_strings or value.strip() in self.own_keys:
            return
        if "\n" in value.strip():  # a whole file's content: each line is asserted
            for ln in value.strip().splitlines():
                self.add_value(ln.strip(), line, group, LiteralKind.LINE)
            return
        k = kind or string_kind(value)
        if NUM_TOKEN.fullmatch(value.strip()):
            k = LiteralKind.NUMBER
        if k == LiteralKind.NUMBER and abs(float(value)) <= 1:
            return
        if k == LiteralKind.PATH:
            p = clean_path(value.strip())
            if is_system(p) or p in self.own_paths or p.count("/") < 2:
                return
            value = p
        self.out.add(Literal(value, k, self.name, line, group, ignore_case))

    def side(self, node: ast.AST, line: int, group: int | None, all_required: bool) -> None:
        """Literals on one side of a positive comparison."""
        s = self.res.string(node)
        if s is not None:
            self.add_value(s, line, group)
            return
        n = self.res.number(node)
        if n is not None:
            self.add_value(n, line, group)
            return
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                ks = self.res.string(k) if k is not None else None
                if ks is not None:
                    self.out.add(Literal(ks, LiteralKind.KEY, self.name, line, group))
                self.side(v, line, group, True)
            return
        elts = self.res.elements(node)
        if elts is not None:
            g = group if all_required else (group or self.out.group())
            kind = LiteralKind.LINE if all_required and len(elts) > 1 else None
            for e in elts:
                if isinstance(e, str) and kind is LiteralKind.LINE and IDENT_RE.match(e):
                    self.add_value(e, line, g, LiteralKind.NAME)
                else:
                    self.add_value(e, line, g, kind if isinstance(e, str) else None)

    def compare(self, node: ast.Compare) -> None:
        if id(node) in self.form_checks:  # a mode, owner or order: read as its own kind
            return
        ctx = _context(node, self.parents)
        if not ctx.asserted:
            return
        group = self._group(ctx)
        sides = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            positive = isinstance(op, ast.Eq | ast.In | ast.Is)
            negative = isinstance(op, ast.NotEq | ast.NotIn | ast.IsNot)
            if not ((positive and not ctx.negated) or (negative and ctx.negated)):
                continue
            left, right = sides[i], sides[i + 1]
            if isinstance(op, ast.In | ast.NotIn):
                # `lit in x`: lit required; `x in [a, b]`: one of the alternatives;
                # `c in "abc..."`: a character class, nothing demanded
                self.side(left, node.lineno, group, True)
                if self.res.string(right) is None:
                    self.side(right, node.lineno, group, False)
            else:
                self.side(left, node.lineno, group, True)
                self.side(right, node.lineno, group, True)

    def call(self, node: ast.Call) -> None:
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        owner = _owner(fn.value) if isinstance(fn, ast.Attribute) else ""
        if name.startswith("assert") and owner == "self":  # unittest
            ctx = _Ctx(True, name.startswith("assertNot"), None)
            if ctx.negated:
                return
            if name in ("assertEqual", "assertEquals", "assertIn", "assertListEqual"):
                for a in node.args[:2]:
                    self.side(a, node.lineno, None, name != "assertIn" or a is node.args[0])
            elif name in ("assertRegex", "assertRegexpMatches") and len(node.args) >= 2:
                self.regex(node.args[1], node.lineno, None, 0)
            return
        if name in ("startswith", "endswith") and isinstance(fn, ast.Attribute) and node.args:
            ctx = _context(node, self.parents)
            if not ctx.asserted or ctx.negated:
                return
            arg = node.args[0]
            elts = self.res.elements(arg)
            if elts is not None:
                g = self.out.group()
                for e in elts:
                    if isinstance(e, str):
                        self.add_value(e, node.lineno, g, LiteralKind.STRING)
                return
            s = self.res.string(arg)
            if s is not None:
                self.add_value(s, node.lineno, self._group(ctx), LiteralKind.STRING)
            return
        if owner == "re" and name in ("match", "fullmatch", "search", "findall", "compile"):
            if not node.args:
                return
            ctx = _context(node, self.parents)
            if name != "compile" and (not ctx.asserted or ctx.negated):
                return
            flags = 0
            for a in [*node.args[2:], *(k.value for k in node.keywords)]:
                if "IGNORECASE" in ast.unparse(a) or ast.unparse(a).endswith(".I"):
                    flags |= re.IGNORECASE
            self.regex(node.args[0], node.lineno, self._group(ctx), flags)
            return
        if name == "get" and isinstance(fn, ast.Attribute) and node.args:
            if "environ" in ast.unparse(fn.value) or owner in _HTTP_CLIENTS:
                return
            ctx = _context(node, self.parents)
            k = self.res.string(node.args[0])
            if ctx.asserted and not ctx.negated and k is not None and k not in self.own_keys:
                if not is_path(k) and "://" not in k:
                    self.out.add(Literal(k, LiteralKind.KEY, self.name, node.lineno))

    def regex(self, node: ast.AST, line: int, group: int | None, flags: int) -> None:
        s = self.res.string(node)
        if s is None or HOLE in s:
            return
        if flags & re.IGNORECASE or s.startswith("(?i)"):
            self.out.add(Literal(s, LiteralKind.FORMAT, self.name, line, group, True))
        else:
            self.out.add(Literal(s, LiteralKind.FORMAT, self.name, line, group))

    def _asserted(self, node: ast.AST) -> bool:
        ctx = _context(node, self.parents)
        return ctx.asserted and not ctx.negated

    def run(self) -> None:
        self.form_checks = python_conventions(self.tree, self.res, self.name, self.out,
                                              self._asserted)  # fmt: skip
        for node in ast.walk(self.tree):
            before = len(self.out.items)
            if isinstance(node, ast.Compare):
                self.compare(node)
            elif isinstance(node, ast.Call):
                self.call(node)
            if len(self.out.items) > before:
                self._asserted_literals(node)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                base = ast.unparse(node.value)
                k = self.res.string(node.slice)
                if k is None or "environ" in base or k in self.own_keys or is_path(k):
                    continue
                if k in self.optional_keys:
                    continue
                if isinstance(node.slice, ast.Constant | ast.Name):
                    self.out.add(Literal(k, LiteralKind.KEY, self.name, node.lineno))
        self._drop_optional_alternatives()
        self.paths()

    def paths(self) -> None:
        """Every absolute path the verifier's code names (pieces of a larger expression are
        folded into it first), except system paths and what the verifier writes itself."""
        parts: set[int] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.BinOp):
                parts |= {id(node.left), id(node.right)}
            elif isinstance(node, ast.JoinedStr | ast.FormattedValue):
                parts |= {id(c) for c in ast.iter_child_nodes(node)}
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "join":
                parts |= {id(a) for a in node.args[1:]}
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Path",):
                parts |= {id(a) for a in node.args[1:]}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assert) and node.msg is not None:
                parts |= {id(n) for n in ast.walk(node.msg)}  # a message, not a check
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                parts.add(id(node.value))  # a docstring
        loaded = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Load)}  # fmt: skip
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id not in loaded for t in node.targets
            ):
                parts |= {id(n) for n in ast.walk(node.value)}  # bound, never used: dead
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.expr) or id(node) in parts:
                continue
            if isinstance(node, ast.Name):
                continue  # the constant it names is visited at its definition
            s = self.res.string(node)
            if s is None or not s.split():
                continue
            first = s.split()[0]
            if not is_path(first.replace(HOLE, "*")):
                continue
            p = clean_path(first)
            if p.count("/") >= 2 and not is_system(p) and p not in self.own_paths:
                line = getattr(node, "lineno", 0)
                self.out.add(Literal(p, LiteralKind.PATH, self.name, line, self._candidates(node)))

    def _candidates(self, node: ast.AST) -> int | None:
        """A group id when `node` is one of several candidate paths: an element of a list
        the verifier searches (`any(...)` over it, or a loop over it that stops at a hit)."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and getattr(parent.func, "id", "") in ("Path", "str"):
            node, parent = parent, self.parents.get(id(parent))
        if not isinstance(parent, ast.List | ast.Tuple | ast.Set) or len(parent.elts) < 2:
            return None
        fn: ast.AST | None = parent
        while fn is not None and not isinstance(fn, ast.FunctionDef | ast.Module):
            fn = self.parents.get(id(fn))
        if fn is None:
            return None
        searched = any(
            (isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("any", "next"))
            or (isinstance(n, ast.For) and any(isinstance(b, ast.Break) for b in ast.walk(n)))
            for n in ast.walk(fn)
        )
        return self.groups.setdefault(id(parent), self.out.group()) if searched else None


def read_python(name: str, text: str, out: Collector) -> None:
    """Add the literals of one Python test file to `out`; SyntaxError if it does not parse."""
    _PythonReader(name, text, out).run()
