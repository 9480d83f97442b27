"""A ``from-cell`` cell re-rendered without a kernel (:func:`atlaslib.rescore.render_from_cell`) sees what the kernel
holds of the notebook's cells above it: their imports and the pandas display options they set, nothing else of their
code; so a tagged cell need not repeat its notebook's imports and display options."""
import nbformat
import pandas as pd

from atlaslib import rescore

SETUP = '''import pandas as pd
from IPython.display import Markdown, display
from atlaslib.escape import md

ran.append("setup code")   # not an import: never run by a re-render
pd.set_option("display.precision", 2)
pd.set_option("display.max_colwidth", None)
'''
FRAME = {"x": [1.234567], "text": ["a long cell text " * 6]}


def _render(source, before, outputs):
    c = nbformat.v4.new_code_cell(source)
    c.outputs = outputs
    return rescore.render_from_cell(c, {"reason": "a <b> reason"}, [], before)


def test_a_tagged_cell_uses_the_notebooks_imports_and_display_options_as_the_kernel_has_them():
    before = [nbformat.v4.new_code_cell("ran = []"), nbformat.v4.new_markdown_cell("import os"),
              nbformat.v4.new_code_cell(SETUP)]
    kind = [nbformat.v4.new_output("display_data", data={"text/html": "", "text/plain": ""}),
            nbformat.v4.new_output("display_data", data={"text/markdown": "", "text/plain": ""})]
    out = _render("display(pd.DataFrame(FRAME))\ndisplay(Markdown(md(cell['reason'])))",
                  before, kind)
    assert out is None   # FRAME is no import of the notebook: the cell fails, the run executes
    out = _render(f"display(pd.DataFrame({FRAME!r}))\ndisplay(Markdown(md(cell['reason'])))", before, kind)
    with pd.option_context("display.precision", 2, "display.max_colwidth", None, "display.max_columns", 20,
                           "display.width", 80):   # the kernel's, then the notebook's
        frame = pd.DataFrame(FRAME)
        assert out[0]["data"]["text/html"] == frame._repr_html_()
        assert out[0]["data"]["text/plain"] == repr(frame)
    assert "1.23" in out[0]["data"]["text/plain"] and "1.235" not in out[0]["data"]["text/plain"]
    assert out[1]["data"]["text/markdown"] == "a &lt;b&gt; reason"
    assert pd.get_option("display.precision") == 6   # the options are the re-render's only, never left set


def test_only_imports_and_literal_pandas_options_are_taken_from_the_cells_above():
    before = [nbformat.v4.new_code_cell(SETUP + "import numpy as np\nnp.set_printoptions(3)\n"
                                        "pd.set_option('display.width', 10 + 150)\nif True:\n    import os\n")]
    setup, options = rescore.kernel_setup(before)
    names = [a.asname or a.name for node in setup.body for a in node.names]
    assert names == ["pd", "Markdown", "display", "md", "np"]   # top-level imports only, in order
    assert options == {"display.precision": 2, "display.max_colwidth": None}   # literal arguments only
    ns = {}
    exec(compile(setup, "<setup>", "exec"), ns)
    assert "ran" not in ns and ns["pd"] is pd
