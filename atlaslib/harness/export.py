"""A card version as a task of lm-evaluation-harness or Inspect (``atlas export-task``), written locally only.

An option-scoring card (its module gives ``OPTION_PROMPT``, a ``str.format`` template over item fields,
``OPTIONS``, the answer options with the positive class first as ``score.options`` reads them, and ``POSITIVE`` /
``LABELS``) exports its test items as ``<task>.jsonl`` (one document per item: ``item_id``, the template's fields,
``gold``: the index of the gold option) and

- ``lm-eval``: ``<task>.yaml``: ``output_type: multiple_choice``, ``doc_to_text`` the card's exact prompt (the
  template's fields as Jinja variables), ``doc_to_choice`` the card's options, ``target_delimiter: ""`` (the options
  carry their own leading space, as the atlas scores them), ``doc_to_target: gold``, ``metric_list: acc``, the local
  JSONL as its data; run with ``lm_eval --include_path DIR --tasks <task>``;
- ``inspect``: ``<task>.py``: an Inspect task over the same JSONL (each sample's ``input`` the card's prompt, its
  ``choices`` the options, ``target`` the gold option's letter, the document in ``metadata["doc"]`` so its logs pair
  with lm-eval's by content hash), scored by ``choice()``.

The files hold the card's item text: they are written into the folder given, never into a book build (the
publish gate withholds some cards' text; this command never touches the build).
"""
from __future__ import annotations

import importlib
import json
import re
import string
from pathlib import Path

FORMATS = ("lm-eval", "inspect")


class ExportError(ValueError):
    """A card or version that cannot be exported as a harness task (one line)."""


def option_card(card: str):
    """The card's module, when it scores answer options (see the module docstring); else ExportError."""
    from ..cards import CARD_MODULES, get_card

    try:
        name = get_card(card).name
    except KeyError as exc:
        raise ExportError(exc.args[0] if exc.args else str(exc)) from None
    module = importlib.import_module(CARD_MODULES[name])
    if not all(hasattr(module, k) for k in ("OPTION_PROMPT", "OPTIONS", "POSITIVE", "LABELS", "load_items", "split")):
        raise ExportError(f"--card {name}: not an option-scoring card (no answer-option prompt); the lm-eval and "
                          "Inspect tasks are for cards whose zero-shot run scores answer options")
    return module


def task_name(card: str, version: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", f"atlas_{card}_{version}".lower())


def documents(card: str, version: str, data_dir=None) -> tuple[list, dict]:
    """The test items of ``card`` ``version`` as harness documents, and what the task needs (prompt, options)."""
    from ..cards import get_card

    module = option_card(card)
    c = get_card(card)
    if version not in c.versions:
        raise ExportError(f"--version {version!r}: card {c.name} has no such version; expected one of "
                          f"{', '.join(c.versions)}")
    template = str(module.OPTION_PROMPT)
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if any(not f.isidentifier() for f in fields):
        raise ExportError(f"--card {c.name}: its prompt's fields {fields} are not plain names")
    items = module.load_items(data_dir)
    manifest = module.split(items, version)
    test = items[items["item_id"].isin(set(manifest.test))].sort_values("item_id")
    labels = list(module.LABELS)
    docs = []
    for _, row in test.iterrows():
        label = row["label"]
        positive = (labels[int(label)] if not isinstance(label, str) else label) == module.POSITIVE
        doc = {"item_id": str(row["item_id"])}
        doc.update({f: str(row[f]) for f in fields})
        doc["gold"] = 0 if positive else 1
        docs.append(doc)
    options = list(module.OPTIONS)
    if len(options) != 2:
        raise ExportError(f"--card {c.name}: {len(options)} options; the export handles a positive and a negative one")
    return docs, {"template": template, "fields": fields, "options": options, "manifest_sha256": manifest.hash,
                  "card": c.name, "version": version}


def prompt_of(doc: dict, spec: dict) -> str:
    return spec["template"].format(**{f: doc[f] for f in spec["fields"]})


def _jinja(template: str) -> str:
    """The card's ``str.format`` template as Jinja (``{sentence}`` -> ``{{sentence}}``; literal braces kept)."""
    out = []
    for literal, f, _, _ in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{ '{' }}").replace("}", "{{ '}' }}") if ("{" in literal or "}" in literal)
                   else literal)
        if f:
            out.append("{{" + f + "}}")
    return "".join(out)


def _yaml_text(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)   # a JSON string is a YAML double-quoted scalar


def export(fmt: str, card: str, version: str, out_dir, data_dir=None) -> dict:
    """Write the task files for ``fmt`` into ``out_dir``; returns what was written."""
    from ..atomicio import atomic_write_text

    if fmt not in FORMATS:
        raise ExportError(f"{fmt!r}: expected one of {', '.join(FORMATS)}")
    docs, spec = documents(card, version, data_dir)
    name = task_name(spec["card"], version)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = out / f"{name}.jsonl"
    atomic_write_text(data, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    files = [str(data)]
    if fmt == "lm-eval":
        text = "\n".join([
            f"# {spec['card']} {version} as an lm-evaluation-harness task, written by `atlas export-task`.",
            f"# Split manifest sha256 {spec['manifest_sha256']}; {len(docs)} test items. Local only: the items' text.",
            f"task: {name}",
            "dataset_path: json",
            "dataset_kwargs:",
            "  data_files:",
            f"    test: {_yaml_text(str(data.resolve()))}",
            "test_split: test",
            "output_type: multiple_choice",
            f"doc_to_text: {_yaml_text(_jinja(spec['template']))}",
            "doc_to_choice: [" + ", ".join(_yaml_text(o) for o in spec["options"]) + "]",
            "doc_to_target: gold",
            'target_delimiter: ""',
            "num_fewshot: 0",
            "metric_list:",
            "  - metric: acc",
            "    aggregation: mean",
            "    higher_is_better: true",
            "metadata:",
            "  version: 1.0",
            ""])
        path = out / f"{name}.yaml"
    else:
        letters = string.ascii_uppercase
        text = "\n".join([
            f'"""{spec["card"]} {version} as an Inspect task, written by `atlas export-task` (local only: the items\' text).',
            "",
            f"Split manifest sha256 {spec['manifest_sha256']}; {len(docs)} test items.",
            '"""',
            "import json",
            "from pathlib import Path",
            "",
            "from inspect_ai import Task, task",
            "from inspect_ai.dataset import MemoryDataset, Sample",
            "from inspect_ai.scorer import choice",
            "from inspect_ai.solver import multiple_choice",
            "",
            f"TEMPLATE = {spec['template']!r}",
            f"FIELDS = {spec['fields']!r}",
            f"OPTIONS = {spec['options']!r}",
            f"DATA = Path(__file__).with_name({data.name!r})",
            "",
            "",
            "def samples():",
            "    for line in DATA.read_text(encoding='utf-8').splitlines():",
            "        doc = json.loads(line)",
            "        yield Sample(id=doc['item_id'], input=TEMPLATE.format(**{f: doc[f] for f in FIELDS}),",
            f"                     choices=[o.strip() for o in OPTIONS], target={letters[:2]!r}[doc['gold']],",
            "                     metadata={'doc': doc})",
            "",
            "",
            "@task",
            f"def {name}():",
            "    return Task(dataset=MemoryDataset(list(samples())), solver=multiple_choice(), scorer=choice())",
            ""])
        path = out / f"{name}.py"
    atomic_write_text(path, text)
    files.append(str(path))
    return {"format": fmt, "card": spec["card"], "version": version, "task": name, "n_items": len(docs),
            "manifest_sha256": spec["manifest_sha256"], "files": files}
