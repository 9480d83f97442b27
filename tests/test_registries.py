"""The one registry idiom (:class:`atlaslib.registries.Registry`) and the registries made of it: model sources,
fact namespaces and card sub-pages."""
import copy

import pytest

from atlaslib.models import SOURCES, ProfileError, Source, source, source_of
from atlaslib.pages import card_pages, facts
from atlaslib.registries import NotRegistered, Registry


def _first():
    pass


def _second():
    pass


def test_names_are_kept_in_order_and_read_like_a_dict():
    r = Registry("widget")
    assert r.add("a", 1) == 1
    r.add("b", 2)

    @r.register("c")
    def c():
        pass

    assert list(r) == r.names() == r.keys() == ["a", "b", "c"]
    assert r.values() == [1, 2, c] and r.items() == [("a", 1), ("b", 2), ("c", c)]
    assert len(r) == 3 and "b" in r and "z" not in r and ["unhashable"] not in r
    assert r["a"] == 1 and r.get("b") == 2 and dict(zip(r.keys(), r.values())) == {"a": 1, "b": 2, "c": c}
    assert r.pop("a") == 1 and r.pop("a", None) is None and list(r) == ["b", "c"]
    with pytest.raises(NotRegistered):
        r.pop("a")


def test_a_name_is_registered_once():
    r = Registry("fact namespace")
    r.add("demo", _first)
    r.add("demo", _first)  # the same object again (a module imported twice): nothing changes
    assert r.items() == [("demo", _first)]
    with pytest.raises(ValueError) as info:
        r.add("demo", _second)
    assert str(info.value) == "fact namespace 'demo' is already registered (_first)"
    assert r["demo"] is _first
    with pytest.raises(ValueError, match="already registered"):
        r.register("demo")(_second)
    # ``same`` widens "the same object": the new one takes the old one's place, in its position
    r.add("other", 1)
    r.add("demo", _second, same=lambda old, new: True)
    assert r.items() == [("demo", _second), ("other", 1)]


def test_before_puts_a_name_ahead_of_another():
    r = Registry("page")
    for name in ("a", "b", "c"):
        r.add(name, name.upper())
    r.add("x", "X", before="b")
    r.add("y", "Y", before="a")
    r.add("z", "Z", before="nowhere")  # not registered: at the end
    r.register("w", before="c")("W")
    assert list(r) == ["y", "a", "x", "b", "w", "c", "z"]
    assert r.values() == ["Y", "A", "X", "B", "W", "C", "Z"]


def test_an_unknown_name_names_the_kind_and_the_known_names():
    r = Registry("model source")
    with pytest.raises(NotRegistered) as info:
        r.get("ftp")
    assert str(info.value) == "unknown model source 'ftp'; known: none"
    r.add("hub", 1)
    r.add("path", 2)
    for lookup in (lambda: r.get("ftp", "profiles.yml: profile 'm'"), lambda: r["ftp"]):
        with pytest.raises(KeyError) as info:  # a KeyError: dict-like readers keep catching it
            lookup()
        assert isinstance(info.value, LookupError)
    with pytest.raises(NotRegistered) as info:
        r.get("ftp", "profiles.yml: profile 'm'")
    assert str(info.value) == "profiles.yml: profile 'm': unknown model source 'ftp'; known: 'hub', 'path'"
    with pytest.raises(NotRegistered, match=r"unknown model source \['x'\]; known: 'hub', 'path'"):
        r.get(["x"])


def test_a_copy_registers_on_its_own():
    r = Registry("fact namespace")
    r.add("a", 1)
    scratch = copy.copy(r)
    scratch.add("b", 2)
    assert list(r) == ["a"] and list(scratch) == ["a", "b"] and scratch.kind == "fact namespace"


def test_the_atlas_registries_are_registries():
    assert isinstance(SOURCES, Registry) and isinstance(facts.PROVIDERS, Registry)
    assert isinstance(card_pages.SUBPAGES, Registry)
    # the sub-pages' order: card-level pages, then each version's, in sidebar order
    assert [(p.slug, p.per_version) for p in card_pages.SUBPAGES.values()] == [
        ("about", False), ("reproduction", False), ("failures", True), ("explorer", True), ("intervals", True),
        ("robustness", True), ("seeds", True)]
    assert list(card_pages.SUBPAGES)[0] == ("about", False)


def test_a_sub_page_goes_before_a_page_of_its_own_level(monkeypatch):
    monkeypatch.setattr(card_pages, "SUBPAGES", copy.copy(card_pages.SUBPAGES))
    page = card_pages.SubPage("notes", "Notes: `{version}`", per_version=True)
    card_pages.register_subpage(page, before="explorer")
    card_pages.register_subpage(page, before="explorer")  # the same page again: nothing changes
    # "about" is a card-level page: a version's page cannot go before it, so it goes to the end
    card_pages.register_subpage(card_pages.SubPage("extra", "Extra", per_version=True), before="about")
    card_pages.register_subpage(card_pages.SubPage("extra", "Extra", per_version=False), before="about")
    assert [(p.slug, p.per_version) for p in card_pages.SUBPAGES.values()] == [
        ("extra", False), ("about", False), ("reproduction", False), ("failures", True), ("notes", True),
        ("explorer", True), ("intervals", True), ("robustness", True), ("seeds", True), ("extra", True)]
    with pytest.raises(ValueError) as info:
        card_pages.register_subpage(card_pages.SubPage("notes", "Other notes"))
    assert str(info.value) == "sub-page 'notes' is already registered (SubPage)"


def test_a_fact_provider_registered_twice(monkeypatch):
    monkeypatch.setattr(facts, "PROVIDERS", copy.copy(facts.PROVIDERS))
    facts.register_provider("demo", _first)
    facts.register_provider("demo", _first)
    with pytest.raises(ValueError, match=r"^fact namespace 'demo' is already registered \(_first\)$"):
        facts.register_provider("demo", _second)
    assert facts.PROVIDERS["demo"] is _first


def test_a_source_class_imported_again_replaces_its_instance_in_place(monkeypatch):
    monkeypatch.setattr("atlaslib.models.registry.SOURCES", copy.copy(SOURCES))
    from atlaslib.models import registry

    def make():
        class Dup(Source):
            pass
        return Dup

    first, again = make(), make()  # the same qualified name: what a re-import makes
    source("dup")(first)
    source("dup")(again)
    assert type(registry.SOURCES["dup"]) is again and again.name == "dup" and list(registry.SOURCES)[-1] == "dup"
    assert type(source_of("dup")) is again

    class Other(Source):
        pass

    with pytest.raises(ValueError, match=r"^model source 'dup' is already registered \(.*make.<locals>.Dup\)$"):
        source("dup")(Other)
    with pytest.raises(ProfileError, match=r"^a profile key 'source' is 'ftp'; expected one of \(.*'dup'\)$"):
        source_of("ftp")
    assert "dup" not in SOURCES
