"""atlaslib.notebook: one source notebook cut by its tags into a run and a data story, and papermill's cell
numbers mapped back to the source."""
import nbformat
import pytest

from atlaslib import notebook


def _nb():
    v4 = nbformat.v4
    cells = [v4.new_markdown_cell("# T"),                                                     # 1
             v4.new_code_cell("model = 'm'", metadata={"tags": ["parameters"]}),             # 2
             v4.new_code_cell("import x", metadata={"tags": ["shared"]}),                    # 3
             v4.new_markdown_cell("## The data", metadata={"tags": ["data-story"]}),         # 4
             v4.new_code_cell("audit()", metadata={"tags": ["data-story", "version:b"]}),    # 5
             v4.new_code_cell("only_b()", metadata={"tags": ["version:b"]}),                 # 6
             v4.new_code_cell("run()")]                                                      # 7
    return v4.new_notebook(cells=cells)


def test_a_run_and_a_story_are_cut_from_one_source():
    nb = _nb()
    run_a = notebook.run_notebook(nb, "a")
    assert [c.source for c in run_a.cells] == ["# T", "model = 'm'", "import x", "run()"]
    assert "remove-cell" in run_a.cells[2].metadata["tags"]  # shared: executed, not shown
    assert "remove-cell" not in nb.cells[2].metadata["tags"]  # the source is left as it was
    assert notebook.run_cell_indices(nb, "b") == [0, 1, 2, 5, 6]
    assert [c.source for c in notebook.story_cells(nb, "a")] == ["model = 'm'", "import x", "## The data"]
    assert [c.source for c in notebook.story_cells(nb, "b")] == ["model = 'm'", "import x", "## The data",
                                                                 "audit()"]


def test_papermill_cell_numbers_map_back_to_the_source():
    nb = _nb()
    # papermill inserts its injected-parameters cell at index 2, right after the parameters cell
    assert [notebook.source_cell_number(nb, i) for i in (0, 1, 3, 6)] == [1, 2, 3, 6]
    assert notebook.source_cell_number(nb, None) is None


def test_a_notebook_without_parameters_is_refused(tmp_path):
    p = tmp_path / "n.md"
    p.write_text("---\njupytext: {text_representation: {extension: .md, format_name: myst}}\n---\n# T\n\n"
                 "```{code-cell} python\nx = 1\n```\n")
    with pytest.raises(notebook.NotebookError, match=r"n\.md: no code cell is tagged 'parameters'"):
        notebook.read_text_notebook(p)
    p.write_text(p.read_text().replace("```{code-cell} python\n", "```{code-cell} python\n:tags: [parameters]\n"))
    nb = notebook.read_text_notebook(p)
    assert notebook.declares_parameter(nb, "x") and not notebook.declares_parameter(nb, "y")


def test_the_source_digest_is_the_files_and_follows_an_edit(tmp_path):
    import hashlib
    import os

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "b.yml").write_text("k: v\n")
    (tmp_path / "notes.md").write_text("not source\n")

    def reference():
        h = hashlib.sha256()
        for rel in ("b.yml", "pkg/a.py"):
            h.update(rel.encode())
            h.update((tmp_path / rel).read_bytes())
        return h.hexdigest()

    first = notebook.source_digest(tmp_path)
    assert first == reference() and notebook.source_digest(tmp_path) == first
    a = tmp_path / "pkg" / "a.py"
    a.write_text("x = 2\n")  # the same size: the modification time tells
    st = a.stat()
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    assert notebook.source_digest(tmp_path) == reference() != first
    (tmp_path / "pkg" / "c.json").write_text("{}")
    assert notebook.source_digest(tmp_path) != reference()  # a new file counts


def test_the_run_digest_is_the_code_a_comment_leaves_it_and_a_statement_or_docstring_changes_it(tmp_path):
    """The run key's digest (``runner.source_digest``): each .py file as Python parses it, other files by their
    bytes (worked by hand here with :func:`ast.dump`). A comment and a blank line leave it as it was, while the
    byte digest (the lessons', which show the source) moves; a statement or a docstring moves both."""
    import ast
    import hashlib
    import os

    from atlaslib import runner

    a, b = tmp_path / "a.py", tmp_path / "b.yml"
    stamp = [1_700_000_000_000_000_000]

    def write(path, text):  # each write with its own modification time (the digests' cache compares them)
        path.write_text(text)
        stamp[0] += 10_000_000
        os.utime(path, ns=(stamp[0], stamp[0]))

    write(a, '"""Doc."""\nx = 1\n')
    write(b, "k: v\n")

    def by_hand():
        h = hashlib.sha256()
        h.update(b"a.py")
        h.update(ast.dump(ast.parse(a.read_text())).encode())
        h.update(b"b.yml")
        h.update(b.read_bytes())
        return h.hexdigest()

    code, raw = runner.source_digest(tmp_path), notebook.source_digest(tmp_path)
    assert code == by_hand() != raw
    write(a, '"""Doc."""\n\n# a comment\nx = 1  # the value\n')
    assert runner.source_digest(tmp_path) == code and notebook.source_digest(tmp_path) != raw
    write(a, '"""Doc, edited."""\nx = 1\n')
    assert runner.source_digest(tmp_path) == by_hand() != code
    docstring = runner.source_digest(tmp_path)
    write(a, '"""Doc, edited."""\nx = 2\n')
    assert runner.source_digest(tmp_path) not in (code, docstring)
    write(b, "k: w\n")
    assert runner.source_digest(tmp_path) == by_hand()
    write(a, "x = (\n")                                                  # not Python: its bytes count
    assert runner.source_digest(tmp_path) == notebook.source_digest(tmp_path)


def _tree_digest(source: str) -> str:
    """The digest worked by hand: sha256 of ``source``'s syntax tree as :mod:`ast` dumps it, field names left out
    (the source written as the digest should see it)."""
    import ast
    import hashlib

    return hashlib.sha256(ast.dump(ast.parse(source), annotate_fields=False).encode()).hexdigest()


def test_the_model_code_digest_leaves_docstrings_out_the_run_digest_keeps_them(tmp_path):
    """One parse for both keys that hold code (:func:`atlaslib.syntax.dump`): the model-call store's
    ``code_digest`` of an adapter module is the tree without any body's leading string, field names left out
    (worked by hand: the tree of the module written without its docstrings), so a docstring edit keeps every
    stored model answer; a statement moves it. The run digest keeps docstrings (one can reach a cell)."""
    from atlaslib import syntax
    from atlaslib.models import calls

    with_docs = tmp_path / "with_docs.py"
    with_docs.write_text('"""Module."""\nclass A:\n    """Class."""\n    def f(self):\n        """Method."""\n'
                         '        return 1  # one\n')
    by_hand = _tree_digest("class A:\n    def f(self):\n        return 1\n")
    assert calls.code_digest(str(with_docs)) == by_hand
    assert syntax.dump(with_docs.read_text()) != syntax.dump(with_docs.read_text(), docstrings=False)
    only_doc = tmp_path / "only_doc.py"
    only_doc.write_text('def g():\n    """Only a docstring."""\n')
    assert calls.code_digest(str(only_doc)) == _tree_digest("def g():\n    pass\n")
    edited = tmp_path / "edited.py"
    edited.write_text(with_docs.read_text().replace("return 1", "return 2"))
    assert calls.code_digest(str(edited)) != by_hand


def test_the_model_code_digest_leaves_out_what_only_describes_an_adapter(tmp_path):
    """An adapter's ``info`` (what its run spec records) is no part of any model output, so an edit there keeps
    every stored answer (worked by hand: the tree without the property); an edit to the code that computes the
    outputs moves the digest. Checked on the option scorer's real module: its ``lm_head`` record and its
    LM-head rows."""
    from pathlib import Path

    from atlaslib.models import calls, hf_options

    mod = tmp_path / "mod.py"
    mod.write_text("class A:\n    @property\n    def info(self):\n        return {'a': 1}\n"
                   "    def f(self):\n        return 1\n")
    assert calls.code_digest(str(mod)) == _tree_digest("class A:\n    def f(self):\n        return 1\n")
    real = Path(hf_options.__file__).read_text(encoding="utf-8")
    record, compute = tmp_path / "record.py", tmp_path / "compute.py"
    assert '"full logits"' in real and "def _head_rows" in real
    record.write_text(real.replace('"full logits"', '"every logit"'))
    head_rows = real.index("def _head_rows")
    compute.write_text(real[:head_rows] + real[head_rows:].replace("return", "return 0 +", 1))
    assert calls.code_digest(str(record)) == calls.code_digest(hf_options.__file__)
    assert calls.code_digest(str(compute)) != calls.code_digest(hf_options.__file__)
