"""Anafora XML, read and written in the THYME layout, with the THYME temporal schema checked.

Layout: ``<root>/<doc>/<doc>.<schema>.<annotator>.<status>.xml`` (e.g.
``ID001_clinic_001/ID001_clinic_001.Temporal-Relation.gold.completed.xml``); the note text, when there is
one, is the file ``<root>/<doc>/<doc>`` (or comes from a separate text folder). THYME's public release has
no text, so every reader here works without it.

Annotations kept: every ``<entity>`` (EVENT, TIMEX3, DOCTIME, SECTIONTIME) with its spans and properties,
every ``<relation>`` (TLINK, ALINK) with its properties; ``Source``/``Target`` hold ids of annotations in
the same file. Errors raise :class:`AnaforaError` naming the file and, for malformed XML, the line.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ... import fsio

#: THYME temporal schema (``temporal-schema.xml``) as far as Clinical TempEval uses it: entity and relation
#: types with their allowed property values. Every value in the THYME Train/Dev annotations is in here
#: (checked by tests/cards/test_tempeval.py against the real files).
SCHEMA: dict[str, dict[str, frozenset]] = {
    "EVENT": {
        "DocTimeRel": frozenset({"BEFORE", "OVERLAP", "BEFORE/OVERLAP", "AFTER"}),
        "Type": frozenset({"N/A", "ASPECTUAL", "EVIDENTIAL"}),
        "Degree": frozenset({"N/A", "MOST", "LITTLE"}),
        "Polarity": frozenset({"POS", "NEG"}),
        "ContextualModality": frozenset({"ACTUAL", "HYPOTHETICAL", "HEDGED", "GENERIC"}),
        "ContextualAspect": frozenset({"N/A", "NOVEL", "INTERMITTENT"}),
        "Permanence": frozenset({"UNDETERMINED", "FINITE", "PERMANENT"}),
    },
    "TIMEX3": {"Class": frozenset({"DATE", "TIME", "DURATION", "QUANTIFIER", "PREPOSTEXP", "SET"})},
    "DOCTIME": {},
    "SECTIONTIME": {},
    "TLINK": {"Type": frozenset({"CONTAINS", "BEFORE", "OVERLAP", "BEGINS-ON", "ENDS-ON"})},
    "ALINK": {"Type": frozenset({"INITIATES", "CONTINUES", "TERMINATES", "REINITIATES"})},
}
RELATION_TYPES = ("TLINK", "ALINK")
REFERENCE_PROPERTIES = ("Source", "Target")
EVENT_ATTRIBUTES = ("ContextualModality", "Degree", "Polarity", "Type")
FILE_RE = re.compile(r"^(?P<doc>.+?)\.(?P<schema>[^.]+)\.(?P<annotator>[^.]+)\.(?P<status>[^.]+)\.xml$")
TEMPORAL_FILE_RE = r"[.]Temporal-(Relation|Entity)[.][^.]+[.][^.]+[.]xml$"


class AnaforaError(ValueError):
    """An Anafora file or corpus is malformed: the message names the file (and line) and what was expected."""


@dataclass
class Entity:
    id: str
    type: str
    spans: tuple[tuple[int, int], ...]
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return min(s for s, _ in self.spans)

    @property
    def end(self) -> int:
        return max(e for _, e in self.spans)


@dataclass
class Relation:
    id: str
    type: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str | None:
        return self.properties.get("Source")

    @property
    def target(self) -> str | None:
        return self.properties.get("Target")


@dataclass
class Document:
    doc_id: str
    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    schema: str = "Temporal-Relation"
    annotator: str = "gold"
    status: str = "completed"
    text: str | None = None
    path: str | None = field(default=None, compare=False)

    @property
    def file_name(self) -> str:
        return f"{self.doc_id}.{self.schema}.{self.annotator}.{self.status}.xml"

    def by_id(self) -> dict[str, Entity | Relation]:
        return {a.id: a for a in [*self.entities, *self.relations]}

    def of_type(self, type_name: str) -> list[Entity]:
        return [e for e in self.entities if e.type == type_name]

    def tlinks(self, link_type: str | None = "CONTAINS") -> list[Relation]:
        return [r for r in self.relations
                if r.type == "TLINK" and (link_type is None or r.properties.get("Type") == link_type)]


def parse_spans(text: str, where: str) -> tuple[tuple[int, int], ...]:
    """``"3532,3535"`` or ``"1,5;7,9"`` -> ((3532, 3535),) / ((1, 5), (7, 9))."""
    spans = []
    for part in (text or "").split(";"):
        m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", part)
        if not m or int(m.group(1)) > int(m.group(2)):
            raise AnaforaError(f"{where}: span {text!r} is not '<start>,<end>[;<start>,<end>...]' with start <= end")
        spans.append((int(m.group(1)), int(m.group(2))))
    return tuple(spans)


_PARSED: dict | None = None  # (path, mtime_ns, size) -> root, while :func:`parse_once` is active


@contextmanager
def parse_once():
    """Within the block, every Anafora file is parsed at most once: the reader and the scorer share the
    parsed tree (keyed by the resolved path, its modification time and size, so a rewritten file is parsed
    again). Outside the block nothing is kept. A run of the card scores inside one block."""
    global _PARSED
    outer, _PARSED = _PARSED, ({} if _PARSED is None else _PARSED)   # an inner block shares the outer one's
    try:
        yield
    finally:
        _PARSED = outer


def parse_root(path: str | os.PathLike) -> ET.Element:
    """The root element of one XML file (from the :func:`parse_once` cache when one is active); malformed
    or unreadable files raise :class:`AnaforaError` naming the file (and the line)."""
    path = Path(path)
    if _PARSED is None:
        return _parse_root(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        return _parse_root(path)
    if key not in _PARSED:
        _PARSED[key] = _parse_root(path)
    return _PARSED[key]


def _parse_root(path: Path) -> ET.Element:
    try:
        with fsio.open_regular(path, "rb", expected="an Anafora XML file") as fh:  # never a pipe: it would block
            return ET.parse(fh).getroot()
    except fsio.NotAFile as exc:
        raise AnaforaError(str(exc)) from None
    except ET.ParseError as exc:
        line, col = exc.position
        raise AnaforaError(f"{path}: malformed XML at line {line}, column {col + 1}: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    except OSError as exc:
        raise AnaforaError(f"{path}: cannot read Anafora XML ({exc.strerror})") from None


def read_document(path: str | os.PathLike, text: str | None = None, *, check_references: bool = True,
                  strict_name: bool = True) -> Document:
    """One Anafora XML file -> :class:`Document`. Relation ``Source``/``Target`` ids must exist in the file.
    ``strict_name=False`` accepts any file name (the document id is then the name up to its first dot)."""
    path = Path(path)
    m = FILE_RE.match(path.name)
    if m is None and strict_name:
        raise AnaforaError(f"{path}: file name is not '<doc>.<schema>.<annotator>.<status>.xml'")
    meta = m.groupdict() if m else {"doc": path.name.split(".")[0], "schema": "", "annotator": "", "status": ""}
    root = parse_root(path)
    if root.tag != "data":
        raise AnaforaError(f"{path}: root element is <{root.tag}>, expected <data>")
    doc = Document(meta["doc"], schema=meta["schema"], annotator=meta["annotator"], status=meta["status"],
                   text=text, path=str(path))
    annotations = root.find("annotations")
    for n, el in enumerate(annotations if annotations is not None else [], 1):
        ann_id = (el.findtext("id") or "").strip()
        type_name = (el.findtext("type") or "").strip()
        where = f"{path}: <{el.tag}> #{n} (id {ann_id or '?'})"
        if not ann_id or not type_name:
            raise AnaforaError(f"{where}: expected non-empty <id> and <type>")
        props_el = el.find("properties")
        props = {} if props_el is None else {p.tag: (p.text or "").strip() for p in props_el}
        if el.tag == "entity":
            doc.entities.append(Entity(ann_id, type_name, parse_spans(el.findtext("span"), where), props))
        elif el.tag == "relation":
            doc.relations.append(Relation(ann_id, type_name, props))
        else:
            raise AnaforaError(f"{where}: unexpected element <{el.tag}>, expected <entity> or <relation>")
    if check_references:
        check_document(doc)
    return doc


def check_document(doc: Document, *, schema: bool = False) -> Document:
    """Unique ids; every relation's Source/Target names an annotation of this document; with ``schema``,
    every type, property and value is one the THYME temporal schema allows (:data:`SCHEMA`)."""
    where = doc.path or doc.doc_id
    ids: dict[str, Entity | Relation] = {}
    for a in [*doc.entities, *doc.relations]:
        if a.id in ids:
            raise AnaforaError(f"{where}: id {a.id!r} is used twice")
        ids[a.id] = a
    for r in doc.relations:
        for prop in REFERENCE_PROPERTIES:
            if prop in r.properties and r.properties[prop] not in ids:
                raise AnaforaError(
                    f"{where}: {r.type} {r.id!r} has {prop} {r.properties[prop]!r}, but no annotation in this "
                    f"file has that id (expected the id of an EVENT/TIMEX3/... in the same file)")
            if r.type in RELATION_TYPES and prop not in r.properties:
                raise AnaforaError(f"{where}: {r.type} {r.id!r} lacks its {prop} property")
    if schema:
        for a in [*doc.entities, *doc.relations]:
            if a.type not in SCHEMA:
                raise AnaforaError(f"{where}: {a.id!r} has type {a.type!r}; the THYME schema has {sorted(SCHEMA)}")
            allowed = SCHEMA[a.type]
            for name, value in a.properties.items():
                if name in REFERENCE_PROPERTIES and a.type in RELATION_TYPES:
                    continue
                if name not in allowed:
                    raise AnaforaError(f"{where}: {a.type} {a.id!r} has property {name!r}; "
                                       f"the THYME schema allows {sorted(allowed)}")
                if value not in allowed[name]:
                    raise AnaforaError(f"{where}: {a.type} {a.id!r} has {name}={value!r}; "
                                       f"expected one of {sorted(allowed[name])}")
        if doc.text is not None:
            for e in doc.entities:
                if e.end > len(doc.text):
                    raise AnaforaError(f"{where}: {e.type} {e.id!r} span ends at {e.end}, past the text's "
                                       f"{len(doc.text)} characters")
    return doc


def _sub(parent: ET.Element, tag: str, text: str | None = None) -> ET.Element:
    el = ET.SubElement(parent, tag)
    if text is not None:
        el.text = text
    return el


def to_xml_string(doc: Document) -> str:
    root = ET.Element("data")
    info = _sub(root, "info")
    _sub(info, "savetime", "atlaslib")
    _sub(info, "progress", doc.status)
    schema = _sub(root, "schema", "temporal-schema.xml")
    schema.set("path", "./")
    schema.set("protocol", "file")
    anns = _sub(root, "annotations")
    for a in [*doc.entities, *doc.relations]:   # entities first, as Anafora writes them
        entity = isinstance(a, Entity)
        el = _sub(anns, "entity" if entity else "relation")
        _sub(el, "id", a.id)
        if entity:
            _sub(el, "span", ";".join(f"{s},{t}" for s, t in a.spans))
        _sub(el, "type", a.type)
        _sub(el, "parentsType", "TemporalEntities" if entity else "TemporalRelations")
        props = _sub(el, "properties")
        for k, v in a.properties.items():
            _sub(props, k, v)
    ET.indent(root, space="\t")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_document(doc: Document, root_dir: str | os.PathLike, *, write_text: bool = False) -> Path:
    """Write ``doc`` as ``<root_dir>/<doc>/<doc>.<schema>.<annotator>.<status>.xml`` (checked first); with
    ``write_text`` also the text file ``<root_dir>/<doc>/<doc>``."""
    check_document(doc)
    folder = Path(root_dir) / doc.doc_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / doc.file_name
    path.write_text(to_xml_string(doc), encoding="utf-8")
    if write_text:
        if doc.text is None:
            raise AnaforaError(f"{doc.doc_id}: write_text=True but the document has no text")
        (folder / doc.doc_id).write_text(doc.text, encoding="utf-8")
    return path


def write_corpus(docs, root_dir: str | os.PathLike, *, write_text: bool = False) -> Path:
    for d in docs:
        write_document(d, root_dir, write_text=write_text)
    return Path(root_dir)


def find_text(doc_id: str, folder: Path, text_dir: str | os.PathLike | None) -> str | None:
    """The note text for ``doc_id``: ``<doc folder>/<doc>``, else ``<text_dir>/<doc>`` or
    ``<text_dir>/<doc>/<doc>``; None when there is none (THYME's public release)."""
    for c in [folder / doc_id, *((Path(text_dir) / doc_id, Path(text_dir) / doc_id / doc_id) if text_dir else ())]:
        if c.exists() and not c.is_dir():
            try:
                return fsio.read_text(c, expected="the note's text")
            except fsio.NotAFile as exc:
                raise AnaforaError(str(exc)) from None
    return None


def read_corpus(root_dir: str | os.PathLike, *, text_dir: str | os.PathLike | None = None,
                xml_name_regex: str = TEMPORAL_FILE_RE) -> list[Document]:
    """Every ``<root>/<doc>/<doc>.*.xml`` matching ``xml_name_regex`` (default: the Temporal-Relation /
    Temporal-Entity layer), sorted by document id; exactly one such file per document folder."""
    root = Path(root_dir)
    if not root.is_dir():
        raise AnaforaError(f"{root}: no such Anafora corpus folder (expected <root>/<doc>/<doc>.<schema>....xml)")
    docs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(f for f in folder.iterdir() if re.search(xml_name_regex, f.name))
        if not files:
            continue
        if len(files) > 1:
            raise AnaforaError(f"{folder}: {len(files)} files match {xml_name_regex!r} ({[f.name for f in files]}); "
                               f"expected one per document")
        doc = read_document(files[0], find_text(folder.name, folder, text_dir))
        if doc.doc_id != folder.name:
            raise AnaforaError(f"{files[0]}: document id {doc.doc_id!r} differs from its folder {folder.name!r}")
        docs.append(doc)
    if not docs:
        raise AnaforaError(f"{root}: no Anafora XML files matching {xml_name_regex!r} under <root>/<doc>/")
    return docs
