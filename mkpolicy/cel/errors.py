"""CEL error types.

Public errors derive from :class:`mkpolicy.errors.CelError` and carry the position
inside the expression (``location.line``/``location.column``, 1-based, and
``offset``, 0-based). Layers that know where the expression came from (a policy file)
translate that into a file position with :meth:`CelError.relocated`.

Inside the evaluator, failures travel as the light-weight :class:`EvalError`, which
CEL's error-absorbing operators (``&&``, ``||``, comprehensions) can catch cheaply;
:class:`mkpolicy.cel.Program` turns it into :class:`CelEvalError` at the boundary.
"""

from __future__ import annotations

from mkpolicy.cel.ast import line_col
from mkpolicy.errors import CelError, Location


class CelExpressionError(CelError):
    """A CEL error positioned inside one expression."""

    def __init__(self, message: str, expression: str = "", offset: int | None = None) -> None:
        line = column = None
        if offset is not None:
            line, column = line_col(expression, offset)
        super().__init__(message, Location(line=line, column=column))
        self.expression = expression
        self.offset = offset

    def relocated(self, location: Location) -> CelError:
        """Return a plain :class:`CelError` of the same class family at ``location``.

        The instance keeps its class so callers can still tell syntax errors from
        runtime errors.
        """
        clone = self.__class__.__new__(self.__class__)
        CelError.__init__(clone, self.message, location)
        clone.expression = self.expression
        clone.offset = self.offset
        return clone


class CelSyntaxError(CelExpressionError):
    """The expression does not parse."""


class CelCompileError(CelExpressionError):
    """The expression parses but cannot be compiled (unknown name, function, field...)."""


class CelTypeError(CelCompileError):
    """The type checker found a type mismatch or an unknown field."""


class CelEvalError(CelExpressionError):
    """Evaluation failed (no such key, no such overload, division by zero...)."""


class CelCostError(CelEvalError):
    """Evaluation exceeded its cost budget or a size limit."""


class EvalError(Exception):
    """Internal runtime error; ``pos`` is filled in by the innermost node that knows it."""

    __slots__ = ("cost", "message", "pos")

    def __init__(self, message: str, pos: int | None = None, cost: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.cost = cost


def no_overload(function: str, *args: object) -> EvalError:
    """The standard "no such overload" error for ``function`` applied to ``args``."""
    from mkpolicy.cel.runtime import type_name  # local: runtime imports this module

    kinds = ", ".join(type_name(a) for a in args)
    return EvalError(f"no such overload: {function}({kinds})")
