"""Compiled expressions (:class:`Program`) and the one-shot :func:`evaluate`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mkpolicy.cel import ast
from mkpolicy.cel.codegen import Generated, generate
from mkpolicy.cel.compiler import BUDGET_KEY, Compiler
from mkpolicy.cel.convert import from_cel, to_cel
from mkpolicy.cel.cost import fixed_cost
from mkpolicy.cel.environment import Environment
from mkpolicy.cel.errors import CelCostError, CelEvalError, EvalError
from mkpolicy.cel.parser import parse
from mkpolicy.cel.runtime import Budget

#: Default cost budget of one evaluation: Kubernetes' per-expression limit
#: (:data:`mkpolicy.cel.PER_CALL_LIMIT`). See :mod:`mkpolicy.cel.cost` for the model.
DEFAULT_COST_LIMIT = 1_000_000


def _overrun(limit: int) -> str:
    return f"operation cancelled: actual cost limit exceeded (limit {limit})"


class CelInternalError(CelEvalError):
    """An unexpected Python exception escaped the evaluator (a bug in mkpolicy)."""


class Program:
    """A compiled CEL expression, ready to evaluate many times."""

    __slots__ = ("_fn", "_generated", "_needs_budget", "ast", "backend", "env", "expression", "fixed_cost")

    def __init__(self, expression: str, env: Environment | None = None, *, backend: str = "codegen") -> None:
        """Parse and compile ``expression``.

        ``backend`` chooses the evaluator: ``"codegen"`` (the default) generates one
        Python function for the expression (:mod:`mkpolicy.cel.codegen`);
        ``"closures"`` evaluates a tree of closures (:mod:`mkpolicy.cel.compiler`),
        the reference semantics the generated code follows. Both raise the same
        compile errors: the closure compiler validates every expression.
        """
        if backend not in ("codegen", "closures"):
            raise ValueError(f"unknown backend {backend!r}")
        self.expression = expression
        self.env = env if env is not None else Environment()
        self.backend = backend
        self.ast: ast.Node = parse(expression, block="block" in self.env.syntax)
        self._fn = Compiler(self.env, expression).compile(self.ast)
        #: Cost charged for every evaluation before any comprehension iterates.
        self.fixed_cost = fixed_cost(self.ast)
        self._generated: Generated | None = None
        self._needs_budget = True
        if backend == "codegen":
            self._generated, self._needs_budget = generate(self.env, expression, self.ast)

    def evaluate(
        self,
        bindings: Mapping[str, Any],
        *,
        cost_limit: int = DEFAULT_COST_LIMIT,
        budget: Budget | None = None,
    ) -> Any:
        """Evaluate with ``bindings`` (CEL runtime values) and return a runtime value.

        The evaluation may spend ``cost_limit`` (Kubernetes cost units), or what is
        left of ``budget`` when one is shared between several evaluations (its
        ``used`` says what they cost). Raises :class:`CelEvalError` (or
        :class:`CelCostError` when the budget is exceeded) positioned in the expression.
        """
        generated = self._generated
        try:
            if generated is not None:
                if budget is None:
                    if self.fixed_cost > cost_limit:
                        raise EvalError(_overrun(cost_limit), 0, cost=True)
                    if not self._needs_budget:
                        # Straight-line code: its cost is the fixed cost, known now.
                        return generated(bindings, None)
                    return generated(bindings, Budget(cost_limit, self.fixed_cost))
                budget.charge(self.fixed_cost, 0)
                return generated(bindings, budget)
            if budget is None:
                budget = Budget(cost_limit)
            activation = dict(bindings)
            activation[BUDGET_KEY] = budget
            budget.charge(self.fixed_cost, 0)
            return self._fn(activation)
        except EvalError as exc:
            cls = CelCostError if exc.cost else CelEvalError
            raise cls(exc.message, self.expression, exc.pos) from None
        except RecursionError:
            raise CelCostError("expression recursion is too deep", self.expression, 0) from None
        except MemoryError:
            raise CelCostError("expression ran out of memory", self.expression, 0) from None
        except Exception as exc:
            raise CelInternalError(f"internal error: {exc!r}", self.expression, 0) from exc


def compile(
    expression: str,
    variables: Iterable[str] | None = None,
    *,
    env: Environment | None = None,
) -> Program:
    """Compile ``expression`` declaring ``variables`` (or against ``env``)."""
    if env is None:
        env = Environment.of(variables or ())
    return Program(expression, env)


def evaluate(expression: str, bindings: Mapping[str, Any] | None = None) -> Any:
    """Evaluate ``expression`` once with plain Python ``bindings`` and return a plain value.

    Values map as the public API says (docs/architecture.md): ``datetime`` for timestamps, ``timedelta``
    for durations, :class:`mkpolicy.cel.Uint` for uint64.
    """
    bindings = bindings or {}
    program = compile(expression, bindings.keys())
    try:
        values = {k: to_cel(v) for k, v in bindings.items()}
    except RecursionError:
        raise CelEvalError("a variable's value nests too deeply to convert", expression, 0) from None
    result = program.evaluate(values)
    try:
        return from_cel(result)
    except RecursionError:
        raise CelEvalError("the result nests too deeply to convert", expression, 0) from None
