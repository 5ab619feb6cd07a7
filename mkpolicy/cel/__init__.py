"""The Kubernetes CEL dialect on cel-python's grammar.

``evaluate(expression, bindings)`` evaluates once; ``compile(expression, variables)``
returns a :class:`Program` to evaluate many times. ``typecheck(program, schemas)``
types a program against the OpenAPI schemas of its variables and
``estimate_cost(program)`` gives its worst-case cost (compare with
:data:`PER_CALL_LIMIT`). Errors are :class:`mkpolicy.errors.CelError` subclasses
positioned in the expression.
"""

from __future__ import annotations

from mkpolicy.cel.checker import typecheck
from mkpolicy.cel.cost import PER_CALL_LIMIT, estimate_cost
from mkpolicy.cel.environment import Environment
from mkpolicy.cel.errors import (
    CelCompileError,
    CelCostError,
    CelEvalError,
    CelExpressionError,
    CelSyntaxError,
    CelTypeError,
)
from mkpolicy.cel.program import DEFAULT_COST_LIMIT, CelInternalError, Program, compile, evaluate
from mkpolicy.cel.runtime import Budget
from mkpolicy.cel.values import Uint
from mkpolicy.errors import CelError

__all__ = [
    "DEFAULT_COST_LIMIT",
    "PER_CALL_LIMIT",
    "Budget",
    "CelCompileError",
    "CelCostError",
    "CelError",
    "CelEvalError",
    "CelExpressionError",
    "CelInternalError",
    "CelSyntaxError",
    "CelTypeError",
    "Environment",
    "Program",
    "Uint",
    "compile",
    "estimate_cost",
    "evaluate",
    "typecheck",
]
