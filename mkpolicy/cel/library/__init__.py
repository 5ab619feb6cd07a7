"""The function library of the CEL dialect.

Each module of this package registers its functions into :data:`STANDARD` with
:func:`function`. A function is looked up by name and call style (global ``f(x)`` or
receiver ``x.f()``); its implementation takes plain runtime values (the receiver
first) and raises :class:`~mkpolicy.cel.errors.EvalError` for unsupported argument
types. ``arities`` lets the compiler reject wrong argument counts before evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mkpolicy.cel.types import Signature


@dataclass(frozen=True, slots=True)
class Function:
    """One CEL function in one call style."""

    name: str
    impl: Callable[..., Any]
    arities: frozenset[int]
    receiver: bool
    #: Called as ``cost(result, *args)`` after a successful call to charge work
    #: proportional to the size of the arguments or result; None for constant cost.
    cost: Callable[..., int] | None = None
    #: Needs the evaluation's Budget as first argument (before the receiver).
    needs_budget: bool = False
    #: Overloads for the type checker (the receiver is the first parameter); empty
    #: means "any arguments, dyn result".
    signatures: tuple[Signature, ...] = ()
    #: Pure functions of constant arguments are evaluated at compile time.
    pure: bool = True


class Library:
    """A registry of functions, keyed by (name, receiver style)."""

    def __init__(self) -> None:
        self._functions: dict[tuple[str, bool], Function] = {}

    def add(self, fn: Function) -> None:
        """Register ``fn``; a later registration of the same name and style replaces it."""
        self._functions[(fn.name, fn.receiver)] = fn

    def lookup(self, name: str, receiver: bool) -> Function | None:
        """The function called ``name`` in the given call style, if any."""
        return self._functions.get((name, receiver))

    def names(self) -> list[str]:
        """All function names, sorted."""
        return sorted({name for name, _ in self._functions})

    def functions(self) -> list[Function]:
        """Every registered function."""
        return list(self._functions.values())

    def extend(self, name: str, receiver: bool, signatures: Sequence[str]) -> None:
        """Add overload signatures to the registered function ``name`` (its impl dispatches)."""
        fn = self._functions[(name, receiver)]
        extra = tuple(Signature(s) for s in signatures)
        self._functions[(name, receiver)] = dataclasses.replace(fn, signatures=fn.signatures + extra)

    def copy(self) -> Library:
        """An independent copy to add functions to."""
        clone = Library()
        clone._functions = dict(self._functions)
        return clone


STANDARD = Library()


def function(
    name: str,
    *,
    arities: Iterable[int] | None = None,
    receiver: bool = False,
    cost: Callable[..., int] | None = None,
    needs_budget: bool = False,
    signatures: Sequence[str] = (),
    pure: bool = True,
    library: Library = STANDARD,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a Python function as the CEL function ``name``.

    ``signatures`` declares the overloads for the type checker in cel-go's notation,
    the receiver first: ``"(string, string) -> bool"``. ``arities`` counts the
    arguments without the receiver; it defaults to what the signatures imply.
    """
    sigs = tuple(Signature(s) for s in signatures)
    if arities is None:
        if not sigs:
            raise ValueError(f"function {name!r} needs arities or signatures")
        if any(s.variadic for s in sigs):
            raise ValueError(f"function {name!r} has variadic signatures: give its arities")
        arities = {len(s.params) - (1 if receiver else 0) for s in sigs}

    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        library.add(Function(name, impl, frozenset(arities), receiver, cost, needs_budget, sigs, pure))
        return impl

    return register


#: Libraries outside the Kubernetes dialect, enabled on request (conformance tests).
EXTRAS: dict[str, Library] = {}


def load_standard() -> Library:
    """Import every library module (they register on import) and return the registry."""
    from mkpolicy.cel.library import (  # noqa: F401
        core,
        format,
        kubernetes,
        lists,
        math,
        network,
        optional,
        quantity,
        regex,
        semver,
        strings,
        time,
        urls,
    )

    return STANDARD


def load_library(extras: Iterable[str] = (), declarations: Iterable[dict[str, Any]] = ()) -> Library:
    """The Kubernetes dialect's functions plus the ``extras`` libraries (``encoders``).

    ``declarations`` declares functions for the type checker only, in the conformance
    suite's ``type_env`` form (``{"function": name, "overloads": [...]}``); calling
    one at run time is an error.
    """
    from mkpolicy.cel.library import extra  # noqa: F401

    base = load_standard()
    extras = list(extras)
    declarations = list(declarations)
    if not extras and not declarations:
        return base
    library = base.copy()
    for name in extras:
        for fn in EXTRAS[name].functions():
            library.add(fn)
    for decl in declarations:
        by_style: dict[bool, list[str]] = {}
        for overload in decl.get("overloads", []):
            receiver = bool(overload.get("receiver_style"))
            params = ", ".join(overload.get("params", []))
            by_style.setdefault(receiver, []).append(f"({params}) -> {overload['result']}")
        for receiver, sigs in by_style.items():
            function(decl["function"], signatures=sigs, receiver=receiver, library=library, pure=False)(
                _declared_only(decl["function"])
            )
    return library


def _declared_only(name: str) -> Callable[..., Any]:
    def impl(*args: Any) -> Any:
        from mkpolicy.cel.errors import EvalError

        raise EvalError(f"function '{name}' is declared but has no implementation")

    return impl
