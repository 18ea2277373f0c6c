"""Reading a PyPTO-Pro kernel from its source, as PyPTO-Pro's own parser does: the function's Python AST.

``Translation`` rewrites the kernel (and every plain Python helper it calls by name) into a function of the
front end's runtime (``_runtime.Runtime``) that keeps the written form's meaning:

- ``with pl.section_cube():`` / ``with pl.section_vector():`` run their block as that core's program;
- ``for i in pl.range(...)`` runs its block as one recorded loop (a ``lax.scan``), a plain ``for`` as Python;
- ``if`` on a traced scalar records both arms, each where it is taken; on a static value, Python's ``if``;
- names a loop or branch rebinds ride in carried-value slots (``ascjax.front._carried``), declared before the
  kernel's first op;
- ``a if c else b``, ``and``, ``or`` and ``not`` on traced scalars select rather than branch, and ``x in c``
  compares a traced ``x`` with each item of ``c`` (or with a ``pl.range``'s bounds and step);
- ``while``, ``break``, ``continue`` and an early ``return`` run as Python while what decides them is static
  (a ``pl.range`` loop with static bounds whose body jumps is unrolled); one a traced value decides is refused.

Every name local to the kernel lives in one environment (``__v``), so the blocks become functions without
``nonlocal``. The rewritten code is compiled under the kernel's file and line numbers, so a report, an error
and a traceback name the user's line. What has no meaning here (a nested ``def``, ``try``) is refused naming
the construct and its line.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import textwrap
import types

#: the names the rewritten code uses (not valid PyPTO-Pro names, so never a user's)
RUNTIME, ENV = "__aj", "__v"


#: binary operators whose result keeps an interval (``Runtime.binop``), by the ``operator`` function's name
BOUNDED_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "floordiv", ast.Mod: "mod"}


class UnsupportedConstruct(NotImplementedError):
    """A construct of the kernel's source that the front end does not run; the message names it and its line."""


def _refuse(node: ast.AST, filename: str, what: str, instead: str) -> UnsupportedConstruct:
    where = f"{os.path.relpath(filename) if not filename.startswith('<') else filename}:{getattr(node, 'lineno', 0)}"
    return UnsupportedConstruct(
        f"rule 'construct': {what} is not supported by ascjax's PyPTO-Pro front end: {instead} (at {where})"
    )


def _function(name: str, args: ast.arguments, body: list) -> ast.FunctionDef:
    """A ``def`` node (``type_params`` only where this Python has them)."""
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    return ast.FunctionDef(name, args, body, [], None, **extra)


def _stored_names(nodes) -> set[str]:
    """The names the statements ``nodes`` bind (in their own scope: not inside lambdas or comprehensions)."""
    found: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in nodes:
        visit(node)
    return found


def _scope_bound(node) -> set[str]:
    """The names a lambda or comprehension binds for its own body."""
    if isinstance(node, ast.Lambda):
        a = node.args
        return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None}
    return {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}


@dataclasses.dataclass
class Translated:
    """A kernel or helper rewritten: ``code(runtime, env)`` runs it with its locals bound in ``env``."""

    function: types.FunctionType
    code: types.FunctionType
    params: inspect.Signature


class _Rewriter(ast.NodeTransformer):
    """Rewrites one function's body (see the module's docstring)."""

    def __init__(self, filename: str, local_names: set[str], first_slot: int, helpers: set[str]):
        self.filename = filename
        self.locals = local_names
        self.next_slot = first_slot
        self.helpers = helpers  # names of the helpers this function calls that are rewritten too
        self.shadow: list[set[str]] = []
        self.counter = 0

    # -- expressions -------------------------------------------------------------------
    def _env(self, name: str, ctx) -> ast.expr:
        return ast.Subscript(ast.Name(ENV, ast.Load()), ast.Constant(name), ctx)

    def _runtime(self, attr: str) -> ast.expr:
        return ast.Attribute(ast.Name(RUNTIME, ast.Load()), attr, ast.Load())

    def visit_Name(self, node: ast.Name):
        if node.id in (RUNTIME, ENV):
            raise _refuse(node, self.filename, f"the name {node.id!r}", "rename it")
        if node.id in self.locals and not any(node.id in s for s in self.shadow):
            return ast.copy_location(self._env(node.id, node.ctx), node)
        return node

    def _scoped(self, node):
        self.shadow.append(_scope_bound(node))
        try:
            return self.generic_visit(node)
        finally:
            self.shadow.pop()

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _scoped

    def _thunk(self, expr: ast.expr) -> ast.Lambda:
        args = ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )
        return ast.copy_location(ast.Lambda(args, expr), expr)

    def visit_IfExp(self, node: ast.IfExp):
        node = self.generic_visit(node)
        call = ast.Call(self._runtime("ifexp"), [node.test, self._thunk(node.body), self._thunk(node.orelse)], [])
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp):
        node = self.generic_visit(node)
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(ast.Call(self._runtime(name), [self._thunk(v) for v in node.values], []), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(ast.Call(self._runtime("not_"), [node.operand], []), node)
        return node

    def visit_BinOp(self, node: ast.BinOp):
        """``a + b`` (``- * // %``): the result keeps an interval where both sides have one (``_bounds``)."""
        node = self.generic_visit(node)
        name = BOUNDED_OPS.get(type(node.op))
        if name is None:
            return node
        call = ast.Call(self._runtime("binop"), [ast.Constant(name), node.left, node.right], [])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign):
        """``x += 1`` on a name: ``x = x + 1`` in place (``binop`` keeps its interval); on anything else as written."""
        if not isinstance(node.target, ast.Name) or type(node.op) not in BOUNDED_OPS:
            return self.generic_visit(node)
        load = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
        value = ast.copy_location(ast.BinOp(load, node.op, node.value), node)
        call = self.visit_BinOp(value)
        call.args[0] = ast.Constant("i" + BOUNDED_OPS[type(node.op)])  # the in-place operator
        target = self.visit(ast.copy_location(ast.Name(node.target.id, ast.Store()), node.target))
        return ast.copy_location(ast.Assign([target], call), node)

    def visit_Compare(self, node: ast.Compare):
        """``x in c`` / ``x not in c``: a run-time ``x`` is compared with each item (or the range's bounds)."""
        node = self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return node
        call = ast.Call(self._runtime("contains"), [node.comparators[0], node.left], [])
        if isinstance(node.ops[0], ast.NotIn):
            call = ast.Call(self._runtime("not_"), [call], [])
        return ast.copy_location(call, node)

    def visit_Subscript(self, node: ast.Subscript):
        node = self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return ast.copy_location(ast.Call(self._runtime("index"), [node.value, node.slice], []), node)
        return node

    def visit_Assign(self, node: ast.Assign):
        node = self.generic_visit(node)
        name = _allocation_name(node)
        if name is not None:  # the tile takes the name the kernel gives it
            node.value = ast.copy_location(
                ast.Call(self._runtime("named"), [ast.Constant(name), self._thunk(node.value)], []), node.value
            )
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign):
        """``x: pl.DT_INT32 = 0``: the annotation types the scalar on the device; here the value is bound as is."""
        if node.value is None:
            return ast.copy_location(ast.Pass(), node)
        return self.visit(ast.copy_location(ast.Assign([node.target], node.value), node))

    def visit_Call(self, node: ast.Call):
        original = node.func
        node = self.generic_visit(node)
        if isinstance(original, ast.Name) and original.id in self.helpers:
            return ast.copy_location(ast.Call(self._runtime("call"), [node.func, *node.args], node.keywords), node)
        if isinstance(original, ast.Name) and original.id in ("min", "max") and original.id not in self.locals:
            return ast.copy_location(ast.Call(self._runtime(original.id + "_"), node.args, node.keywords), node)
        return node

    # -- statements --------------------------------------------------------------------
    def body(self, stmts: list, *, top: bool = False) -> list:
        out = []
        for i, stmt in enumerate(stmts):
            last = top and i == len(stmts) - 1
            out.extend(self.statement(stmt, last_of_function=last))
        return out or [ast.Pass()]

    def _slots(self, nodes) -> ast.Tuple:
        """``((name, slot), ...)`` for the locals ``nodes`` bind: what a loop or branch may carry."""
        pairs = []
        for name in sorted(_stored_names(nodes) & self.locals):
            pairs.append(ast.Tuple([ast.Constant(name), ast.Constant(self.next_slot)], ast.Load()))
            self.next_slot += 1
        return ast.Tuple(pairs, ast.Load())

    def _block(self, kind: str, stmts: list, anchor: ast.AST) -> tuple[ast.FunctionDef, str]:
        self.counter += 1
        name = f"__aj_{kind}_{anchor.lineno}_{self.counter}"
        args = ast.arguments(posonlyargs=[], args=[ast.arg(ENV)], vararg=None, kwonlyargs=[], kw_defaults=[],
                             kwarg=None, defaults=[])  # fmt: skip
        fn = _function(name, args, self.body(stmts))
        return ast.copy_location(fn, anchor), name

    def _check_jumps(self, stmts: list, where: str) -> None:
        """Refuse a ``break`` / ``continue`` that would leave a section (a section is no loop)."""
        for node in _own_jumps(stmts):
            word = "break" if isinstance(node, ast.Break) else "continue"
            raise _refuse(node, self.filename, f"'{word}' in {where}", "break out of a loop inside the section")

    def _target(self, node: ast.expr, where: ast.AST) -> ast.expr:
        if isinstance(node, ast.Name):
            return ast.Constant(node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            return ast.Tuple([self._target(x, where) for x in node.elts], ast.Load())
        raise _refuse(where, self.filename, f"the loop target {ast.unparse(node)}", "loop over a plain name")

    def _call_stmt(self, name: str, args: list, anchor: ast.AST) -> ast.stmt:
        call = ast.Call(self._runtime(name), args, [])
        return ast.copy_location(ast.Expr(ast.copy_location(call, anchor)), anchor)

    def statement(self, stmt: ast.stmt, *, last_of_function: bool = False) -> list:
        line = ast.Constant(stmt.lineno)
        env = ast.Name(ENV, ast.Load())
        if isinstance(stmt, ast.For):
            if stmt.orelse:
                raise _refuse(stmt, self.filename, "'for ... else'", "move the else block after the loop")
            slots = self._slots(stmt.body)
            target = self._target(stmt.target, stmt)
            iterable = self.visit(stmt.iter)
            jumps = ast.Constant(_jumps_anywhere(stmt.body))
            fn, name = self._block("for", stmt.body, stmt)
            args = [iterable, ast.Name(name, ast.Load()), env, target, slots, line, jumps]
            return [fn, self._call_stmt("for_", args, stmt)]
        if isinstance(stmt, ast.While):
            if stmt.orelse:
                raise _refuse(stmt, self.filename, "'while ... else'", "move the else block after the loop")
            test = self._thunk(self.visit(stmt.test))
            fn, name = self._block("while", stmt.body, stmt)
            return [fn, self._call_stmt("while_", [test, ast.Name(name, ast.Load()), env, line], stmt)]
        if isinstance(stmt, (ast.Break, ast.Continue)):
            return [self._call_stmt("break_" if isinstance(stmt, ast.Break) else "continue_", [line], stmt)]
        if isinstance(stmt, ast.If):
            slots = self._slots([*stmt.body, *stmt.orelse])
            test = self.visit(stmt.test)
            then, then_name = self._block("then", stmt.body, stmt)
            out = [then]
            other: ast.expr = ast.Constant(None)
            if stmt.orelse:
                orelse, else_name = self._block("else", stmt.orelse, stmt.orelse[0])
                out.append(orelse)
                other = ast.Name(else_name, ast.Load())
            out.append(self._call_stmt("if_", [test, ast.Name(then_name, ast.Load()), other, env, slots, line], stmt))
            return out
        if isinstance(stmt, ast.With):
            if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None:
                raise _refuse(stmt, self.filename, f"'with {ast.unparse(stmt.items[0])}'",
                              "write 'with pl.section_cube():' or 'with pl.section_vector():'")  # fmt: skip
            self._check_jumps(stmt.body, "a section")
            ctx = self.visit(stmt.items[0].context_expr)
            fn, name = self._block("with", stmt.body, stmt)
            return [fn, self._call_stmt("with_", [ctx, ast.Name(name, ast.Load()), env, line], stmt)]
        if isinstance(stmt, ast.Return):
            if last_of_function:
                return [self.visit(stmt)]
            value = self.visit(stmt.value) if stmt.value is not None else ast.Constant(None)
            return [self._call_stmt("return_", [value, line], stmt)]
        refused = {
            ast.AsyncFor: ("'async for'", "use 'for i in pl.range(n)'"),
            ast.Try: ("'try'", "let errors propagate"),
            ast.FunctionDef: ("a function defined inside the kernel", "define it at module level and call it"),
            ast.AsyncFunctionDef: ("an async function", "define a plain function at module level"),
            ast.ClassDef: ("a class defined inside the kernel", "define it at module level"),
            ast.Global: ("'global'", "pass the value as an argument"),
            ast.Nonlocal: ("'nonlocal'", "pass the value as an argument"),
            ast.Delete: ("'del'", "let the name go out of use"),
        }
        for kind, (what, instead) in refused.items():
            if isinstance(stmt, kind):
                raise _refuse(stmt, self.filename, what, instead)
        return [self.visit(stmt)]


def _jumps_anywhere(stmts: list) -> bool:
    """Whether ``stmts`` break, continue or return anywhere (their nested loops included): a ``pl.range`` loop
    around such a body is unrolled, so the values that decide the jumps are static where they can be."""
    jumps = (ast.Break, ast.Continue, ast.Return)
    found = False

    def visit(node):
        nonlocal found
        if isinstance(node, jumps):
            found = True
        elif not isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            for child in ast.iter_child_nodes(node):
                visit(child)

    for stmt in stmts:
        visit(stmt)
    return found


def _own_jumps(stmts: list) -> list:
    """The ``break`` / ``continue`` statements of ``stmts`` that leave them (not those of a loop nested inside)."""
    found = []

    def visit(node):
        if isinstance(node, (ast.Break, ast.Continue)):
            found.append(node)
        elif not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            for child in ast.iter_child_nodes(node):
                visit(child)

    for stmt in stmts:
        visit(stmt)
    return found


def _callee(node) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return None


def _allocation_name(node: ast.Assign) -> str | None:
    """The variable a ``make_tile`` / ``make_tile_group`` result is assigned to (None: not such an assignment)."""
    target = node.targets[0] if len(node.targets) == 1 else None
    if _callee(node.value) in ("make_tile", "make_tile_group") and isinstance(target, (ast.Name, ast.Subscript)):
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):  # a rewritten local
            return target.slice.value
    return None


def _source_of(fn) -> tuple[ast.FunctionDef, str]:
    """``fn``'s definition as an AST with the file's line numbers, and its file name."""
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise UnsupportedConstruct(
            f"rule 'source': cannot read the source of {getattr(fn, '__qualname__', fn)!r} ({exc}): PyPTO-Pro kernels "
            "are read from their source, so define the kernel in a .py file"
        ) from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise UnsupportedConstruct(f"rule 'source': {fn!r} is not a plain function definition")
    return node, filename


def _is_user_function(value) -> bool:
    """Whether ``value`` is a plain Python function of the user's (a helper to read and rewrite too)."""
    if not isinstance(value, types.FunctionType) or value.__name__ == "<lambda>":
        return False
    module = getattr(value, "__module__", "") or ""
    return module.split(".")[0] not in ("ascjax", "jax", "jaxlib", "numpy", "equinox", "pypto_pro", "torch")


def _free_values(fn) -> dict:
    """The values of ``fn``'s closure variables."""
    return {name: cell.cell_contents for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())}


class Translation:
    """A kernel and the helpers it calls, rewritten; their carried-value slots numbered apart (``n_slots`` in all)."""

    def __init__(self, kernel, constants: tuple = ()):
        self.constants = frozenset(constants)  # names every function reads as the launch's values (tiling keys)
        self.functions: dict = {}  # code object -> Translated
        self.n_slots = 0
        self.sections: set[str] = set()  # the section kinds the kernel and its helpers write ("cube", "vector")
        # the kernel or a helper makes structs or valid-shape tiles (a section's take reserved carried slots)
        self.section_slots = False
        # a helper, or a section of the kernel, makes tiles (a section's are made while it is discovered)
        self.declares_in_sections = False
        self.kernel = self._translate(kernel, stack=())

    @property
    def aiv_only(self) -> bool:
        """The kernel writes vector sections and no cube one: PyPTO-Pro launches it AIV-only, each block one AIV."""
        return self.sections == {"vector"}

    def _translate(self, fn, stack: tuple) -> Translated:
        code_key = fn.__code__
        if code_key in self.functions:
            return self.functions[code_key]
        if code_key in stack:
            raise UnsupportedConstruct(f"rule 'construct': {fn.__qualname__} calls itself: recursion is not supported")
        node, filename = _source_of(fn)
        for item in (i for w in ast.walk(node) if isinstance(w, ast.With) for i in w.items):
            kind = _callee(item.context_expr)
            if kind in ("section_cube", "section_vector"):
                self.sections.add(kind.removeprefix("section_"))
        if any(_callee(n) in ("struct", "struct_array", "set_validshape") for n in ast.walk(node)) or any(
            isinstance(n, ast.keyword) and n.arg == "valid_shape" for n in ast.walk(node)
        ):
            self.section_slots = True
        within = (
            ast.walk(node) if stack else (n for w in ast.walk(node) if isinstance(w, ast.With) for n in ast.walk(w))
        )
        if any(_callee(n) in ("make_tile", "make_tile_group") for n in within):
            self.declares_in_sections = True
        params = inspect.signature(fn)
        local_names = set(params.parameters) | _stored_names(node.body) | set(fn.__code__.co_freevars) | self.constants
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        namespace = {**fn.__globals__, **_free_values(fn)}
        helpers = {n for n in names - local_names if _is_user_function(namespace.get(n))}
        helpers |= {n for n in names & set(fn.__code__.co_freevars) if _is_user_function(namespace.get(n))}
        for name in sorted(helpers):
            self._translate(namespace[name], (*stack, code_key))
        rewriter = _Rewriter(filename, local_names, self.n_slots, helpers)
        body = rewriter.body(node.body, top=True)
        args = ast.arguments(posonlyargs=[], args=[ast.arg(RUNTIME), ast.arg(ENV)], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])  # fmt: skip
        wrapper = ast.copy_location(_function(f"__aj_{node.name}", args, body), node)
        module = ast.fix_missing_locations(ast.Module([wrapper], type_ignores=[]))
        scope: dict = {}
        exec(compile(module, filename, "exec"), fn.__globals__, scope)  # noqa: S102 - the user's own kernel source
        translated = Translated(fn, scope[wrapper.name], params)
        self.n_slots = rewriter.next_slot
        self.functions[code_key] = translated
        return translated
