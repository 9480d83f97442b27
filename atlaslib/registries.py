"""One idiom for the atlas's registries: a name is registered once, and a look-up of a name nobody registered
says what kind of thing was asked for and which names there are.

The model sources (:data:`atlaslib.models.registry.SOURCES`), the fact namespaces
(:data:`atlaslib.pages.facts.PROVIDERS`) and the card sub-pages (:data:`atlaslib.pages.card_pages.SUBPAGES`)
are each a :class:`Registry`. It imports nothing of atlaslib, so a module on any floor may hold one.
"""
from __future__ import annotations

from typing import Callable, Generic, Hashable, Iterator, TypeVar

T = TypeVar("T")

_MISSING = object()


class NotRegistered(KeyError):
    """A look-up of a name nobody registered: one line naming the kind, the name and the known names (a
    :class:`KeyError`, so code that reads a registry like a dict keeps catching it; ``str(exc)`` is the plain
    message, without the quotes a KeyError adds)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _holder(obj) -> str:
    """What holds a name, for the duplicate error: a class's or function's name, else its object's class."""
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__


class Registry(Generic[T]):
    """Names -> objects of one ``kind`` (``"model source"``, ``"fact namespace"``), in the order of
    registration (or before a given name: :meth:`add`). Read it like a dict: ``name in r``, ``r[name]``,
    ``list(r)`` (the names), :meth:`items`, :meth:`values`, ``len(r)``.

    ``show`` writes a name in messages (``repr`` unless the names are keys of another shape, such as the
    sub-pages' ``(slug, per_version)``)."""

    def __init__(self, kind: str, *, show: Callable[[Hashable], str] = repr):
        self.kind = kind
        self.show = show
        self._items: dict[Hashable, T] = {}

    # -- registering ----------------------------------------------------------------------------------------

    def add(self, name: Hashable, obj: T, *, before: Hashable | None = None,
            same: Callable[[T, T], bool] | None = None) -> T:
        """Register ``obj`` under ``name``, at the end or just before the name ``before`` (at the end when
        ``before`` is not registered); returns ``obj``. A name registered again with the same object is a
        no-op (a module imported twice registers twice); with another object it is a :class:`ValueError`
        naming the kind, the name and what holds it. ``same(old, new)`` widens "the same" (e.g. a class of
        the same qualified name, re-created by a re-import): the new object then takes the old one's place."""
        if name in self._items:
            old = self._items[name]
            if old is obj:
                return obj
            if same is None or not same(old, obj):
                raise ValueError(f"{self.kind} {self.show(name)} is already registered ({_holder(old)})")
            self._items[name] = obj
            return obj
        if before is None or before not in self._items:
            self._items[name] = obj
            return obj
        items = list(self._items.items())
        at = next(i for i, (k, _) in enumerate(items) if k == before)
        self._items = dict(items[:at] + [(name, obj)] + items[at:])
        return obj

    def register(self, name: Hashable, *, before: Hashable | None = None) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: ``@r.register("name")`` above a function or class."""
        def decorate(obj: T) -> T:
            return self.add(name, obj, before=before)
        return decorate

    def pop(self, name: Hashable, default=_MISSING):
        """Remove ``name`` and return its object (``default`` when it is not registered; without one, a
        :class:`NotRegistered`). For tests that register something and leave the registry as it was."""
        if name in self._items:
            return self._items.pop(name)
        if default is _MISSING:
            self.get(name)
        return default

    # -- looking up ----------------------------------------------------------------------------------------

    def get(self, name: Hashable, who: str | None = None) -> T:
        """The object registered under ``name``; else :class:`NotRegistered` naming ``who`` asked (when
        given), the kind, the name and the known names."""
        if name in self:
            return self._items[name]
        known = ", ".join(self.show(n) for n in self._items) or "none"
        prefix = f"{who}: " if who else ""
        shown = self.show(name) if _hashable(name) else repr(name)
        raise NotRegistered(f"{prefix}unknown {self.kind} {shown}; known: {known}")

    __getitem__ = get

    def __contains__(self, name) -> bool:
        return _hashable(name) and name in self._items

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[Hashable]:
        """The registered names, in order."""
        return list(self._items)

    keys = names

    def items(self) -> list[tuple[Hashable, T]]:
        return list(self._items.items())

    def values(self) -> list[T]:
        return list(self._items.values())

    def __copy__(self) -> Registry[T]:
        """A registry of the same names that registers on its own (a test's scratch copy)."""
        new = Registry(self.kind, show=self.show)
        new._items = dict(self._items)
        return new

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.show(n) for n in self._items)})"


def _hashable(name) -> bool:
    try:
        hash(name)
    except TypeError:
        return False
    return True
