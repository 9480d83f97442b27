"""The robustness pages' statement checks (``tests/statements/robust.py``) on hand-made pages: each finds the
statement as the fb90d89 book printed it and passes the corrected one."""
from __future__ import annotations

import nbformat
import pandas as pd

from tests.statements.robust import (check_collapsed_variants_are_marked, check_holm_columns_name_their_family,
                                     check_seeded_perturbation_intervals_pair_the_seeds)

GOLD = ["negated", "affirmed", "affirmed", "negated", "affirmed", "affirmed"]
IDS = [f"i{k}" for k in range(len(GOLD))]


def _cell(model, protocol, preds, variant=None, seeds=None):
    c = {"card": "negex", "version": "v", "model": model, "protocol": protocol, "status": "ok",
         "spec": {"parameters": {"variant": variant} if variant else {}}, "metrics": {},
         "predictions": [{"item_id": i, "gold": g, "pred": p} for i, g, p in zip(IDS, GOLD, preds)]}
    if seeds:
        c["extra"] = {"seed_runs": [{"seed": s, "predictions": [{"item_id": i, "pred": p} for i, p in zip(IDS, ps)]}
                                    for s, ps in seeds]}
    return c


def _cells():
    """A fine-tune over two seeds whose lowercase variant changes no seed's answer (seed 2 differs from seed 1 on
    one item, so a draw of the two runs' seeds apart moves the difference), and a zero-shot run whose lowercase
    variant answers "affirmed" for every item."""
    s1, s2 = list(GOLD), ["affirmed"] + GOLD[1:]
    lower = {"kind": "perturbation", "name": "lower", "version": "v1"}
    return [_cell("enc", "finetune", s1, seeds=[(1, s1), (2, s2)]),
            _cell("enc", "finetune", s1, lower, seeds=[(1, s1), (2, s2)]),
            _cell("lm", "zero_shot", GOLD[:3] + ["affirmed"] * 3),
            _cell("lm", "zero_shot", ["affirmed"] * 6, lower)]


def _site(root, right: bool):
    """The card's robustness page and the fine-tune's run page, as fb90d89 printed them or as corrected. The rows'
    b / c: 0 / 0 (p 1) and 2 / 0 (p 0.5): Holm over the table's 2 rows gives 1.000 and 1.000; over the run's own
    1 perturbation, 1.000."""
    holm = "p (Holm over the table's perturbation runs: 2)" if right else "p (Holm)"
    seeded = "+0.000 [+0.000, +0.000]" if right else "+0.000 [-0.083, +0.083]"
    mark = "; **collapsed: answers affirmed for all 6 items**" if right else ""
    page = root / "book/cards/negex/v/robustness.md"
    page.parent.mkdir(parents=True)
    page.write_text(
        "## Robustness table\n\nA run trained with several seeds ... "
        + ("Its difference's interval is seed-paired: each seed's perturbed run against the same seed's default "
           "run." if right else "Its interval draws seeds and items (two-level).") + "\n\n"
        f"| model | protocol | perturbation | items read (applicable) | default | perturbed | difference [95 %] | b | c "
        f"| p | {holm} |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
        f"| enc (2 seeds) | finetune | `lower` | 6 of 6 | 0.917 | 0.917 | {seeded} | 0 | 0 | 1.000 | 1.000 |\n"
        f"| lm | zero_<wbr>shot | `lower`{mark} | 6 of 6 | 0.667 | 0.400 | -0.267 [-0.500, +0.000] | 2 | 0 | 0.500 "
        "| 1.000 |\n")
    run = "p (Holm over this run's variants of the same kind: 1 perturbation)" if right else "p (Holm)"
    frame = pd.DataFrame({"items read": [6], "difference [95 %]": [seeded], "b": [0], "c": [0], "p": ["1.000"],
                          run: ["1.000"]}, index=pd.Index(["lower (perturbation)"], name="variant"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("run_frame(...)", outputs=[
        nbformat.v4.new_output("display_data", data={"text/html": frame.to_html()})])])
    path = root / "book/runs/negex/v/enc/finetune.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


CHECKS = (check_seeded_perturbation_intervals_pair_the_seeds, check_holm_columns_name_their_family,
          check_collapsed_variants_are_marked)


def test_the_robustness_checks_catch_the_old_statements_and_pass_the_corrected_ones(tmp_path):
    cells = _cells()
    _site(tmp_path / "right", right=True)
    assert [p for c in CHECKS for p in c(tmp_path / "right", cells)] == []

    _site(tmp_path / "old", right=False)
    seeded = check_seeded_perturbation_intervals_pair_the_seeds(tmp_path / "old", cells)
    assert any("enc (finetune) lower: no seed's model changes an answer" in p and "'+0.000 [-0.083, +0.083]'" in p
               for p in seeded), seeded
    assert any("does not name the seed pairing" in p for p in seeded), seeded
    holm = check_holm_columns_name_their_family(tmp_path / "old", cells)
    assert any("robustness page: the column 'p (Holm)' does not say over which family" in p for p in holm), holm
    assert any("finetune.ipynb: the column 'p (Holm)' does not say" in p for p in holm), holm
    collapsed = check_collapsed_variants_are_marked(tmp_path / "old", cells)
    assert collapsed == ["negex v lm (zero_shot) lower: answers 'affirmed' for all 6 items read, yet its row is not "
                         "marked collapsed"]


def test_the_holm_check_recomputes_the_family_it_names(tmp_path):
    """A header that names a family of the wrong size, or a value that is not Holm over it, is reported."""
    cells = _cells()
    _site(tmp_path, right=True)
    page = tmp_path / "book/cards/negex/v/robustness.md"
    page.write_text(page.read_text().replace("perturbation runs: 2)", "perturbation runs: 30)"))
    found = check_holm_columns_name_their_family(tmp_path, cells)
    assert any("names 30 rows in its family, the table has 2" in p for p in found), found
    page.write_text(page.read_text().replace("perturbation runs: 30)", "perturbation runs: 2)")
                    .replace("| 0.500 | 1.000 |", "| 0.500 | 0.500 |"))
    found = check_holm_columns_name_their_family(tmp_path, cells)
    assert len(found) == 1 and found[0].startswith("negex v robustness page: lm zero_shot lower") and found[0].endswith(
        "shows '0.500'; Holm over its 2 rows' exact McNemar p gives 1.000"), found
