"""The book's "Imported evaluations" part: only when imports exist, never in a publish build; its leaderboard
and item explorer hold the numbers recomputed from the logs."""
from __future__ import annotations

import json

import numpy as np
import yaml
from sklearn.metrics import accuracy_score

from atlaslib.cli import main
from atlaslib.pages import imported

from .logs import docs, sample, write_run

TOC = {"format": "jb-book", "root": "book/intro", "parts": [{"caption": "Cards", "chapters": [{"file": "book/cards/negex"}]}]}


def _src(tmp_path):
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "_toc.yml").write_text(yaml.safe_dump(TOC, sort_keys=False))
    return src


def test_imported_part_only_with_imports_and_its_numbers_are_the_logs(tmp_path, capsys):
    results = tmp_path / "results"
    src = _src(tmp_path)
    assert imported.render(src, results) == []
    assert yaml.safe_load((src / "_toc.yml").read_text()) == TOC and not (src / "book" / "imported").exists()

    ds = docs(25)
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 25)
    ll = {m: -rng.gamma(2.0, 1.0, size=(25, 2)) for m in ("org/a", "org/b")}
    paths = [write_run(tmp_path / "logs", m, [sample(i, ds[i], v[i].tolist(), int(gold[i])) for i in range(25)])
             for m, v in ll.items()]
    code = main(["import", *map(str, paths), "-o", str(tmp_path / "out"), "--resamples", "200", "--book",
                 "--results-dir", str(results)])
    assert code == 0, capsys.readouterr().err
    docs_written = imported.render(src, results)
    assert docs_written == ["book/imported/index", "book/imported/negex_toy"]
    toc = yaml.safe_load((src / "_toc.yml").read_text())
    assert toc["parts"][-1]["caption"] == "Imported evaluations"
    page = (src / "book" / "imported" / "negex_toy.md").read_text()
    for m, v in ll.items():
        acc = accuracy_score(gold, v.argmax(1))
        assert f"| {m} | acc | {acc:.3f} |" in page
    assert "## Item explorer" in page and "no fever" not in page          # documents by id, no text
    board = json.loads((src / "book" / "imported" / "negex_toy" / "report.json").read_text())["leaderboard"]
    assert [r["value"] for r in board if r["metric"] == "acc"] == [accuracy_score(gold, v.argmax(1)) for v in ll.values()]
    assert (src / "book" / "imported" / "negex_toy" / "items.csv").is_file()

    src2 = _src(tmp_path / "p")
    assert imported.render(src2, results, publish=True) == []
    assert yaml.safe_load((src2 / "_toc.yml").read_text()) == TOC
