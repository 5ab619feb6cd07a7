"""What an expression may refer to: variables, functions and message types."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mkpolicy.cel.library import Library, load_standard

#: Fields of Kubernetes' ``JSONPatch`` message type.
JSONPATCH_FIELDS = frozenset({"op", "path", "from", "value"})


def kubernetes_message_fields(type_name: str) -> frozenset[str] | None:
    """Fields allowed in ``type_name{...}``: None for any field, or raise KeyError if unknown.

    Kubernetes MutatingAdmissionPolicy knows ``JSONPatch`` and the schemaless
    ``Object`` family (``Object``, ``Object.spec``, ``Object.spec.template`` ...).
    """
    if type_name == "JSONPatch":
        return JSONPATCH_FIELDS
    if type_name == "Object" or type_name.startswith("Object."):
        return None
    raise KeyError(type_name)


@dataclass(frozen=True)
class Environment:
    """The declarations an expression is compiled against.

    ``variables`` are the names bindings will provide (qualified names such as
    ``a.b.c`` are allowed). With ``allow_undeclared`` unknown names are looked up at
    evaluation time instead of failing compilation (CEL's "disable check" mode).
    """

    variables: frozenset[str] = frozenset()
    container: str = ""
    allow_undeclared: bool = False
    library: Library = field(default_factory=load_standard)
    message_fields: Callable[[str], frozenset[str] | None] = kubernetes_message_fields
    #: Syntax outside the Kubernetes dialect: ``"block"`` (cel-go's ``cel.block``).
    syntax: frozenset[str] = frozenset()

    @classmethod
    def of(cls, variables: Iterable[str], **kwargs: object) -> Environment:
        """An environment declaring ``variables``."""
        return cls(variables=frozenset(variables), **kwargs)  # type: ignore[arg-type]

    def candidates(self, name: str, root: bool = False) -> list[str]:
        """Qualified names ``name`` may refer to, most specific first (CEL name resolution)."""
        if root or not self.container:
            return [name]
        parts = self.container.split(".")
        out = [".".join([*parts[:i], name]) for i in range(len(parts), 0, -1)]
        out.append(name)
        return out
