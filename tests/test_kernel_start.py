"""A kernel that dies before it answers (its ports taken by another process between jupyter_client's choice and the
kernel's bind) is started again; a notebook's own error never is."""
from __future__ import annotations

import pytest

from atlaslib import notebook


def _papermill(monkeypatch, errors):
    import papermill

    calls = []

    def execute_notebook(*a, **k):
        calls.append(k["kernel_manager_class"])
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    return calls


def test_a_kernel_that_died_at_start_is_started_again(monkeypatch, tmp_path):
    calls = _papermill(monkeypatch, [RuntimeError(notebook.KERNEL_DIED_AT_START)])
    notebook.execute(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {})
    assert len(calls) == 2


def test_it_is_started_at_most_kernel_starts_times(monkeypatch, tmp_path):
    calls = _papermill(monkeypatch, [RuntimeError(notebook.KERNEL_DIED_AT_START)] * 5)
    with pytest.raises(RuntimeError, match=notebook.KERNEL_DIED_AT_START):
        notebook.execute(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {})
    assert len(calls) == notebook.KERNEL_STARTS == 3


def test_any_other_error_is_raised_at_once(monkeypatch, tmp_path):
    calls = _papermill(monkeypatch, [RuntimeError("a cell raised")])
    with pytest.raises(RuntimeError, match="a cell raised"):
        notebook.execute(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {})
    assert len(calls) == 1
