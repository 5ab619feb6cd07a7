"""The Kubernetes CEL dialect on cel-python's grammar.

``evaluate(expression, bindings)`` evaluates once; ``compile(expression, variables)``
returns a :class:`Program` to evaluate many times. Errors are
:class:`mkpolicy.errors.CelError` subclasses positioned in the expression.
"""

from __future__ import annotations

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
from mkpolicy.cel.values import Uint
from mkpolicy.errors import CelError

__all__ = [
    "DEFAULT_COST_LIMIT",
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
    "evaluate",
]
