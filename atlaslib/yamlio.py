"""The one reader of the YAML files users give the atlas (profile files, matrix files): strict and bounded.

:func:`load` reads one file and answers every problem with one error naming the file (and the line where
there is one), of the class the caller passes (``error=``, default :class:`YamlError`):

- the path is not there, is a folder or not a regular file (a named pipe would block), is larger than
  :data:`MAX_BYTES`, or is not UTF-8 text (a byte-order mark is fine);
- not valid YAML, or nested deeper than Python can follow;
- safe loading only: a tag outside plain YAML (``!!python/object``, ``!!binary`` ...) is refused;
- aliases (``*name``) may repeat what an anchor (``&name``) wrote, but the whole document, aliases expanded,
  may be at most :data:`MAX_EXPANSION` nodes and characters larger than as written (an "alias bomb" of a few
  lines that expands to gigabytes is refused before anything is built), and an alias inside its own anchor is
  refused;
- a key given twice in one mapping (a profile name, a key of a matrix entry) is refused, naming the key and
  both lines (YAML's merge key ``<<`` may still be overridden, as YAML intends);
- with ``entries=`` a dataclass, the file is a mapping of entries and each entry's keys that are fields of the
  dataclass must have the declared type (``str``, ``str | None``, ``list[str]``, ``dict``; null is left to the
  caller): a mapping where text is expected, a list description, a nested list in a list of strings or a
  number where text is expected are refused, naming the entry, key and line, instead of being turned into
  strings.

Every mapping comes back as a :class:`Mapping` (a ``dict``) that knows the line of each of its keys
(:func:`line_of`), so a caller's own checks can name the line too.
"""
from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path

import yaml

from .userfile import read_text

#: a user YAML file larger than this is refused (profile and matrix files are a few kilobytes)
MAX_BYTES = 10 * 1024 * 1024
#: how much larger (nodes + characters) than as written a document may grow when its aliases are expanded
MAX_EXPANSION = 100_000

_MERGE = "tag:yaml.org,2002:merge"


class YamlError(ValueError):
    """A user YAML file cannot be read, is not plain YAML, or breaks one of :func:`load`'s rules."""


class Mapping(dict):
    """A YAML mapping as a ``dict`` that remembers where it stands: ``line`` (1-based), ``lines`` (key ->
    line of its value) and ``key_lines`` (key -> line of the key itself)."""

    line: int = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: dict = {}
        self.key_lines: dict = {}


def line_of(mapping, key=None) -> int | None:
    """The 1-based line of ``key``'s value in ``mapping`` (of the mapping itself without ``key``); None when
    ``mapping`` did not come from :func:`load`."""
    if not isinstance(mapping, Mapping):
        return None
    return mapping.line if key is None else mapping.lines.get(key, mapping.line)


def describe(value) -> str:
    """What a YAML value is, for an error message: 'a mapping', 'a list', 'the number 3', 'true', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"


class _Loader(yaml.SafeLoader):
    """SafeLoader whose mappings are :class:`Mapping` and refuse repeated keys; records where aliases stand."""

    def __init__(self, stream, where: str, error):
        super().__init__(stream)
        self.where, self.error, self.alias_lines = where, error, []

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.alias_lines.append(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)


def _construct_mapping(loader: _Loader, node):
    data = Mapping()
    data.line = node.start_mark.line + 1
    yield data
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:
            raise loader.error(f"{loader.where}, line {key_node.start_mark.line + 1}: a mapping key must be "
                               f"text or a number, got {describe(key)}") from None
        if first is not None:
            raise loader.error(f"{loader.where}, line {key_node.start_mark.line + 1}: key {key!r} is given twice "
                               f"in the same mapping (first at line {first}); YAML would silently keep the last")
        seen[key] = key_node.start_mark.line + 1
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        data[key] = loader.construct_object(value_node, deep=False)
        data.lines[key] = value_node.start_mark.line + 1
        data.key_lines[key] = key_node.start_mark.line + 1


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def _sizes(root) -> tuple[int, int]:
    """(size as written, size with aliases expanded) of a node graph: 1 per node plus its characters."""
    memo: dict[int, int] = {}
    active: set[int] = set()
    written = 0

    def own(node) -> int:
        return 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)

    def expanded(node) -> int:
        nonlocal written
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:
            raise RecursionError("alias inside its own anchor")
        active.add(key)
        written += own(node)
        size = own(node)
        if isinstance(node, yaml.SequenceNode):
            size += sum(expanded(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(expanded(k) + expanded(v) for k, v in node.value)
        active.discard(key)
        memo[key] = size
        return size

    total = expanded(root)
    return written, total


def _yaml_problem(exc: yaml.YAMLError, where: str) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f", line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if isinstance(exc, yaml.constructor.ConstructorError) and "constructor for the tag" in str(problem):
        tag = str(problem).split("tag", 1)[1].strip(" '")
        tag = tag.replace("tag:yaml.org,2002:", "!!")
        return (f"{where}{at}: the tag {tag!r} is not allowed; the file must be plain YAML (mappings, lists, "
                f"text, numbers, true/false, null)")
    return f"{where}{at}: not valid YAML ({' '.join(str(problem).split())})"


def load(path: str | os.PathLike, *, what: str = "YAML file", entries=None, error=YamlError):
    """The content of the YAML file ``path`` under the rules of this module; ``what`` names the file in
    messages ("profiles file", "matrix file"); ``entries``: a dataclass whose field types each entry of the
    top-level mapping must respect; ``error``: the exception class raised (one line, naming the file)."""
    path = Path(path)
    where = str(path)
    text = read_text(path, what=f"a {what} (YAML)", error=error, max_bytes=MAX_BYTES)
    loader = _Loader(text, where, error)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if loader.alias_lines:
                try:
                    written, total = _sizes(node)
                except RecursionError as exc:
                    if "own anchor" in str(exc):
                        raise error(f"{where}, line {loader.alias_lines[0]}: an alias refers to the anchor it "
                                    f"stands in (a structure that contains itself)") from None
                    raise
                if total - written > MAX_EXPANSION:
                    raise error(f"{where}, line {loader.alias_lines[0]}: its aliases (*name) expand the file to "
                                f"more than {MAX_EXPANSION:,} nodes and characters beyond what is written (an alias "
                                f"bomb?); write the values out or use fewer aliases")
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise error(_yaml_problem(exc, where)) from None
        except RecursionError:
            raise error(f"{where}: nested too deeply to read") from None
    finally:
        loader.dispose()
    if entries is not None:
        check_entries(data, entries, where, error)
    return data


# -- typed entries ------------------------------------------------------------------------------------------

def _expected(hint) -> tuple[str, typing.Callable[[object], bool]] | None:
    """(wording, test) for a field type; None for a type this module does not check."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _expected(inner[0]) if len(inner) == 1 else None
    if hint is str:
        return "text", lambda v: isinstance(v, str)
    if hint is dict or origin is dict:
        return "a mapping", lambda v: isinstance(v, dict)
    if hint is list or origin is list:
        if args == (str,):
            return "a list of text items", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)
        return "a list", lambda v: isinstance(v, list)
    return None


def check_entries(data, entry_type, where: str, error=YamlError) -> None:
    """Each entry of the mapping ``data`` gives the fields of the dataclass ``entry_type`` their declared
    types (null passes: whether a field may be empty is the caller's rule)."""
    if not isinstance(data, dict):
        return
    hints = typing.get_type_hints(entry_type)
    fields = [f.name for f in dataclasses.fields(entry_type)]
    for name, entry in data.items():
        if not isinstance(entry, dict):
            continue
        for key in fields:
            if key not in entry or entry[key] is None:
                continue
            rule = _expected(hints[key])
            if rule is None or rule[1](entry[key]):
                continue
            value = entry[key]
            got = describe(value)
            if isinstance(value, list) and rule[0].startswith("a list of text"):
                bad = next(x for x in value if not isinstance(x, str))
                got = f"a list holding {describe(bad)}"
            hint = " (put it in quotes)" if isinstance(value, (int, float, bool)) and rule[0] == "text" else ""
            raise error(f"{where}, line {line_of(entry, key)}: {entry_type.__name__.lower()} {name!r} key {key!r} "
                        f"must be {rule[0]}, got {got}{hint}")
