"""A kernel's own process stderr never reaches the atlas's: the kernel's loggers (e.g. tornado's traceback of a ZMQ
socket closed under a shutdown after a failed run, seen on a loaded machine) and anything else written to the
kernel process's stderr stay out of `atlas run` / `make book`, which print one line per problem and no traceback.
A cell's own errors still reach the notebook (and the atlas's one line) as before."""
import nbformat

from atlaslib import notebook


def test_what_a_kernel_process_writes_to_its_stderr_is_not_on_the_callers_stderr(tmp_path, capfd):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"},
                                            "language_info": {"name": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import logging, os, sys, time\n"
                                          "sys.__stderr__.write('written to the process stderr\\n')\n"
                                          "sys.__stderr__.flush()\n"
                                          "os.write(2, b'written to fd 2\\n')\n"
                                          "logging.getLogger('tornado.general').error('a kernel logger line')\n"
                                          "time.sleep(0.5)\n"
                                          "print('the cell ran', x)")]
    nbformat.write(nb, tmp_path / "in.ipynb")
    notebook.execute(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {"x": 2}, timeout=120)
    shown = "".join(o.get("text", "") for o in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[-1].outputs)
    assert "the cell ran 2" in shown
    err = capfd.readouterr().err
    for line in ("written to the process stderr", "written to fd 2", "a kernel logger line"):
        assert line not in err
