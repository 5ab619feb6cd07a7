"""Load FrameworkPolicy documents from files, directories and strings.

Every problem is reported with its file, line and column, saying what was expected and
what was found; all problems of all files are collected before raising, so one run
shows everything that needs fixing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from mkpolicy.errors import InputError, Location, PolicyError, did_you_mean
from mkpolicy.policy.model import API_VERSION, KIND, FrameworkPolicy
from mkpolicy.policy.source import Document, Path, dotted, parse_documents, read_text

#: Other mkpolicy kinds that may live next to policies (skipped when loading policies).
OTHER_KINDS = frozenset({"FrameworkPolicyTest"})
YAML_SUFFIXES = (".yaml", ".yml")
#: Directories never searched (besides hidden ones and virtualenvs).
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})

StrPath = str | os.PathLike[str]


def load(paths: StrPath | Iterable[StrPath]) -> list[FrameworkPolicy]:
    """Load policies from files and directories (searched recursively for ``*.yaml``).

    In a directory, documents that are not ``mkpolicy.io`` objects (example objects,
    CRDs) and policy test suites are skipped; a file named explicitly must hold only
    FrameworkPolicies. Raises :class:`PolicyError` listing every problem found.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    policies: list[FrameworkPolicy] = []
    problems: list[PolicyError] = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            files = discover(path)
            if not files:
                problems.append(InputError("directory holds no *.yaml or *.yml files", Location(path)))
            before = (len(policies), len(problems))
            for file in files:
                _load_file(file, policies, problems, explicit=False)
            if files and (len(policies), len(problems)) == before:
                problems.append(InputError("directory holds no FrameworkPolicy documents", Location(path)))
        elif os.path.exists(path):
            _load_file(path, policies, problems, explicit=True)
        else:
            problems.append(InputError("no such file or directory", Location(path)))
    problems.extend(duplicate_frameworks(policies))
    if problems:
        raise aggregate(problems)
    return policies


def loads(text: str, file: str = "<string>") -> list[FrameworkPolicy]:
    """Load the policies in a YAML string (``file`` names it in error messages)."""
    policies: list[FrameworkPolicy] = []
    problems: list[PolicyError] = []
    _load_text(text, file, policies, problems, explicit=True)
    problems.extend(duplicate_frameworks(policies))
    if problems:
        raise aggregate(problems)
    return policies


def walk(directory: str) -> Iterator[tuple[str, list[str]]]:
    """``(directory, files)`` under ``directory``, sorted, as policies and suites are searched:
    hidden files and directories, virtualenvs and dependency trees are left out."""
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIPPED_DIRS
            and not os.path.exists(os.path.join(root, d, "pyvenv.cfg"))
        )
        yield root, sorted(f for f in files if not f.startswith("."))


def discover(directory: str) -> list[str]:
    """The YAML files under ``directory`` (see :func:`walk`)."""
    return [os.path.join(root, f) for root, files in walk(directory) for f in files if f.endswith(YAML_SUFFIXES)]


def may_hold_policies(text: str) -> bool:
    """Whether a YAML stream may hold a FrameworkPolicy, judged from libyaml's node tree.

    Files found in directories are mostly example objects, CRDs and test suites: this
    skips them without the slow positional parse. Documents are classified as
    :func:`document_kind` does; streams libyaml cannot compose (syntax errors, nesting
    too deep to compose safely, anything odd) count as relevant, so that the full parse
    reports them.
    """
    import yaml

    from mkpolicy import yamldata

    try:
        yamldata.check_depth(text)
    except InputError:
        return True
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for node in yaml.compose_all(text, Loader=loader):
            if not isinstance(node, yaml.MappingNode):
                return True
            keys = {key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)}
            header = {
                key.value: value.value
                for key, value in node.value
                if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode)
            }
            if document_kind({k: header.get(k, True) for k in keys}) == "policy":
                return True
    except Exception:
        return True
    return False


def aggregate(problems: list[PolicyError]) -> PolicyError:
    """One error standing for several (its message lists them all)."""
    if len(problems) == 1:
        return problems[0]
    message = f"{len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)
    return PolicyError(message, problems[0].location, problems=problems)


def _load_file(file: str, policies: list[FrameworkPolicy], problems: list[PolicyError], explicit: bool) -> None:
    try:
        text = read_text(file)
    except PolicyError as exc:
        problems.append(exc)
        return
    if not explicit and not may_hold_policies(text):
        return  # test suites, example objects, CRDs
    _load_text(text, file, policies, problems, explicit)


def _load_text(
    text: str, file: str, policies: list[FrameworkPolicy], problems: list[PolicyError], explicit: bool
) -> None:
    try:
        documents = list(parse_documents(text, file))
    except PolicyError as exc:
        problems.append(exc)
        return
    found = 0
    for doc in documents:
        kind = document_kind(doc.data)
        if kind == "skip":
            if explicit:
                problems.append(
                    PolicyError(
                        f"expected apiVersion {API_VERSION!r} and kind {KIND!r}; "
                        f"found {describe_document(doc.data)} (document {doc.index + 1})",
                        doc.source.location(()),
                    )
                )
            continue
        if kind == "other":
            continue
        found += 1
        try:
            policies.append(validate_document(doc))
        except PolicyError as exc:
            problems.extend(exc.problems)
    if explicit and found == 0 and not documents:
        problems.append(PolicyError("file holds no YAML documents; expected a FrameworkPolicy", Location(file)))


def document_kind(data: Any) -> str:
    """``policy``, ``other`` (another mkpolicy kind, e.g. a test suite) or ``skip``
    (not an mkpolicy document: an example object, a CRD...)."""
    if not isinstance(data, dict):
        return "policy"  # validation will say what is wrong
    api_version = data.get("apiVersion")
    if isinstance(api_version, str) and api_version.startswith("mkpolicy.io/"):
        return "other" if data.get("kind") in OTHER_KINDS else "policy"
    if "apiVersion" not in data and "kind" not in data and "spec" in data:
        return "policy"  # a policy missing its header: report it, do not skip it
    return "skip"


def describe_document(data: Any) -> str:
    """apiVersion and kind of a document, for messages."""
    if isinstance(data, dict):
        return f"apiVersion {data.get('apiVersion')!r}, kind {data.get('kind')!r}"
    return f"a {type(data).__name__}"


def validate_document(doc: Document) -> FrameworkPolicy:
    """Validate one YAML document as a FrameworkPolicy (positions from its source map)."""
    if not isinstance(doc.data, dict):
        raise PolicyError(f"expected a FrameworkPolicy mapping; found {_yaml_type(doc.data)}", doc.source.location(()))
    try:
        policy = FrameworkPolicy.model_validate(doc.data)
    except ValidationError as exc:
        problems = [_problem(err, doc) for err in exc.errors(include_url=False)]
        raise aggregate(problems) from None
    policy._source = doc.source
    return policy


def duplicate_frameworks(policies: list[FrameworkPolicy]) -> list[PolicyError]:
    """One problem per framework GVK that more than one policy claims."""
    first: dict[str, FrameworkPolicy] = {}
    problems = []
    for policy in policies:
        gvk = str(policy.spec.gvk)
        if gvk in first:
            other = first[gvk]
            where = other.locate(("spec", "framework"))
            problems.append(
                PolicyError(
                    f"framework {gvk} already has policy {other.name!r} (at {where}); "
                    "expected one policy per framework",
                    policy.locate(("spec", "framework")),
                )
            )
        else:
            first[gvk] = policy
    return problems


def _yaml_type(value: Any) -> str:
    """How YAML users call the type of ``value``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    return f"a {type(value).__name__}"


_EXPECTED_WORDS = [
    (re.compile(r"a valid dictionary( or instance of \w+)?"), "a mapping"),
    (re.compile(r"a valid list"), "a list"),
    (re.compile(r"a valid string"), "a string"),
    (re.compile(r"a valid integer"), "an integer"),
    (re.compile(r"a valid boolean"), "a boolean (true or false)"),
]


def _data_path(data: Any, loc: tuple[Any, ...]) -> Path:
    """Map a pydantic error location to a path in the data (dropping union tags)."""
    path: list[str | int] = []
    cur = data
    for seg in loc:
        in_dict = isinstance(cur, dict) and seg in cur
        if in_dict or (isinstance(cur, list) and isinstance(seg, int) and 0 <= seg < len(cur)):
            path.append(seg)
            cur = cur[seg]
        elif isinstance(cur, dict) and cur.get("type") == seg:
            continue  # discriminated-union tag
        else:
            path.append(seg)
            cur = None
    return tuple(path)


def _problem(err: Any, doc: Document) -> PolicyError:
    loc = tuple(err.get("loc", ()))
    path = _data_path(doc.data, loc)
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    given = err.get("input")
    where = dotted(path)
    if kind == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1], doc.data)
        hint = did_you_mean(str(loc[-1]), allowed) if loc else ""
        hint += f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return PolicyError(
            f"unknown field {where!r}{hint}", doc.source.location(path, key=True), reason="unknown-field"
        )
    if kind == "missing":
        parent = path[:-1]
        return PolicyError(f"missing required field {where!r}", doc.source.location(parent, key=True))
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        expected = err.get("ctx", {}).get("expected_tags", "'JSONPatch', 'ApplyConfiguration'")
        found = given.get("type") if isinstance(given, dict) else given
        return PolicyError(
            f"{where}.type: expected one of {expected}; found {found!r}",
            doc.source.location((*path, "type")),
        )
    if kind == "duplicate_name":
        return PolicyError(f"{where}: {msg}", doc.source.location(path), reason="duplicate-name")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
        return PolicyError(f"{where}: {msg}", doc.source.location(path))
    if msg.startswith("Input should be"):
        msg = "expected" + msg[len("Input should be") :]
        for pattern, words in _EXPECTED_WORDS:
            msg = pattern.sub(words, msg)
    return PolicyError(f"{where}: {msg}; found {_yaml_type(given)}", doc.source.location(path))


def _allowed_fields(loc: tuple[Any, ...], data: Any) -> list[str]:
    """The YAML field names allowed at ``loc``, walking the models (and union tags)."""
    annotation: Any = FrameworkPolicy
    for seg in loc:
        if isinstance(seg, int):
            continue
        members = _models_in(annotation)
        for model in members:
            info = next((i for n, i in model.model_fields.items() if seg in (n, i.alias)), None)
            if info is not None:
                annotation = info.annotation
                break
        else:
            tagged = [
                m for m in members if "type" in m.model_fields and seg in get_args(m.model_fields["type"].annotation)
            ]
            if not tagged:
                return []
            annotation = tagged[0]
    members = _models_in(annotation)
    if len(members) != 1:
        return []
    return sorted(info.alias or name for name, info in members[0].model_fields.items())


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes inside an annotation (through Optional, list, Annotated, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        out.extend(_models_in(arg))
    return out
