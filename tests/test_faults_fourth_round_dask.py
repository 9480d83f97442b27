"""Faults, fourth round (the Dask part): an address that is no Dask scheduler, numeric executor options, and an
interrupted run's variant cells.

(a) a server that answers every connection with garbage and (b) one that sends a malformed handshake, then
silence, are refused with one line naming the address and saying that a Dask scheduler was expected (they
ended in numpy's "Unable to allocate 6.46 EiB" and in ``struct.error`` tracebacks); (c) ``--memory-limit``
negative, NaN or infinite is refused before anything starts (it reached Dask's Nanny); (d) a run interrupted
after its notebook wrote its variant cells leaves the previous outputs as they were (the new variant cells had
replaced the old ones beside the old cell, or were left without any cell).

The fake servers are deterministic: bound on 127.0.0.1 by the test and kept open until it ends, they answer
at once, and the deadlines stay generous (nothing here waits for a deadline on the fixed code). No kernel
starts: the run's notebook is a stand-in that writes what a notebook writes.
"""
from __future__ import annotations

import json
import signal
import socket
import threading
from pathlib import Path

import pytest

from atlaslib import executor
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import refused  # one line on stderr, no traceback, the exit code
from tests.test_faults_user import files_under

N100 = "atlas-n100-v1"
#: the old code could wait for a deadline here: fail instead of hanging
GUARD = pytest.mark.timeout(300)


class Answering:
    """A TCP server on a loopback port of its own that sends ``replies[k]`` to its k-th connection (the last one
    to every later connection), then keeps the connection open and says nothing more. Bounded: its thread stops
    when the server is closed, or after 10 minutes."""

    def __init__(self, *replies: bytes):
        self.replies, self.conns = list(replies), []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for _ in range(3000):
            if self.stop.is_set():
                return
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(conn)
            try:
                conn.sendall(self.replies[min(len(self.conns), len(self.replies)) - 1])
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        for c in [*self.conns, self.sock]:
            c.close()


def _dask_handshake() -> bytes:
    """A handshake as a Dask scheduler sends it (a length, the frame count and lengths, a msgpack mapping)."""
    import msgpack

    frame = msgpack.packb({"compression": None, "python": (3, 11, 7), "pickle-protocol": 5})
    body = (1).to_bytes(8, "little") + len(frame).to_bytes(8, "little") + frame
    return len(body).to_bytes(8, "little") + body


GARBAGE = b"\x00\x01garbage"
MALFORMED = (1).to_bytes(8, "little") + (10 ** 9).to_bytes(8, "little") + b"x" * 10


def _book_args(tmp_path: Path, address: str) -> tuple:
    m = tmp_path / "m.yml"
    m.write_text(f"- {{card: negex, version: {N100}, model: majority, protocol: zero_shot}}\n")
    return ("book", "--matrix", m, "--no-default", "--force", "--scheduler", address, "--build-dir", tmp_path / "b",
            "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n")


# ------------------------------------------------------------------------------------------------ (a)


@GUARD
def test_a_an_address_that_answers_with_garbage_is_refused_as_no_dask_scheduler(tmp_path, capsys, monkeypatch):
    from atlaslib.pages import datastory

    monkeypatch.setattr(datastory, "run_stories", lambda *a, **k: [])  # no kernel beside the matrix
    with Answering(GARBAGE) as server:
        line = refused(capsys, *_book_args(tmp_path, server.address))
    assert f"the server at {server.address} (scheduler) did not answer with a Dask handshake" in line, line
    assert "expected a Dask scheduler there" in line and "announce a message of" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.json"))


# ------------------------------------------------------------------------------------------------ (b)


@GUARD
def test_b_a_malformed_handshake_is_refused_naming_the_address(tmp_path, capsys, monkeypatch):
    from atlaslib import executor
    from atlaslib.pages import datastory

    monkeypatch.setattr(datastory, "run_stories", lambda *a, **k: [])
    with Answering(MALFORMED) as server:  # a length of 1 byte, then silence
        line = refused(capsys, *_book_args(tmp_path, server.address))
    assert f"the server at {server.address} (scheduler) did not answer with a Dask handshake" in line, line
    assert "expected a Dask scheduler there" in line

    # whatever Dask's own connection then reads (a server that answers the check like a scheduler and the next
    # connection with garbage): one ExecutorError naming the address, never struct.error or a MemoryError
    # (Dask may instead wait for the bytes the reply announces until the connection deadline ends it, named as for
    # a silent server: which comes first depends on the machine's load and Dask's reads, and either is one line)
    for later in (MALFORMED, GARBAGE):
        with Answering(_dask_handshake(), later) as server:
            with pytest.raises(executor.ExecutorError) as err:
                executor._connect(server.address, "scheduler", 10.0)
        msg = str(err.value)
        refused_as_garbage = (f"the server at {server.address} (scheduler) did not answer with a Dask handshake" in msg
                              and "expected a Dask scheduler there" in msg)
        timed_out = (f"the Dask scheduler at {server.address} (scheduler) did not complete "
                     f"the connection within 10 s" in msg)
        assert (refused_as_garbage or timed_out) and "\n" not in msg, msg


# ------------------------------------------------------------------------------------------------ (c)


def test_c_a_negative_nan_or_infinite_memory_limit_is_refused_before_anything_starts(tmp_path, capsys,
                                                                                      monkeypatch):
    from atlaslib import book, executor

    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("started despite a bad --memory-limit"))
    for bad in ("-5GiB", "-1", "nan", "inf", "1e400"):
        line = refused(capsys, "book", "--card", "negex", f"--memory-limit={bad}", "--executor", "dask",
                       "--results-dir", tmp_path / "r")
        assert f"memory_limit is {bad!r}; expected a size such as '4GiB'" in line, line
        assert "finite and not negative" in line
    # with --no-run too: the option is named though no run would use it
    line = refused(capsys, "book", "--no-run", "--card", "negex", "--memory-limit=-1", "--executor", "dask",
                   "--results-dir", tmp_path / "r")
    assert "memory_limit is '-1'; expected a size such as '4GiB'" in line, line
    for bad in (-5, float("nan"), float("inf"), True):  # the same from Python
        with pytest.raises(ValueError, match="memory_limit is"):
            executor.check_options("dask", memory_limit=bad)
    with pytest.raises(ValueError, match="n_workers is True; expected a whole number >= 1"):
        executor.check_options("dask", n_workers=True)
    for good in ("4GiB", "auto", "0", 0, 0.5, 8 * 2 ** 30):  # Dask's own meanings: a size, no limit, a share
        assert executor.check_options("dask", memory_limit=good) == ("dask", None)


# ------------------------------------------------------------------------------------------------ (d)


def _variant(key: str) -> dict:
    return {"card": "negex", "version": N100, "model": "majority", "protocol": "zero_shot", "metrics": {},
            "status": "ok", "spec": {"parameters": {"variant": {"key": key}}}}


def test_d_an_interrupted_run_keeps_no_variant_cell_and_the_old_ones_stay(tmp_path, capsys, monkeypatch,
                                                                          data_dir):
    from atlaslib import runner
    from atlaslib.cards import run as card_run
    from atlaslib.variants import write_variant_cells

    results, runs = tmp_path / "r", tmp_path / "n"
    args = ("run", "--card", "negex", "--model", "majority", "--protocol", "zero_shot", "--version", N100,
            "--force", "--results-dir", results, "--runs-dir", runs, "--build-dir", tmp_path / "b")
    cell = card_run.run("negex", N100, "majority", "zero_shot", data_dir=data_dir)  # a real cell, no kernel
    interrupt = {"now": True}

    def notebook(src, out, params, **kw):  # what the notebook writes: its variant cells, its cell
        Path(out).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        write_variant_cells([_variant("new")], params["result_path"], "zero_shot")
        if interrupt["now"]:  # Ctrl-C after the variants, before the cell
            signal.raise_signal(signal.SIGINT)
        Path(params["result_path"]).write_text(json.dumps({**cell, "run_key": params["run_key"]}))

    monkeypatch.setattr(runner, "execute_notebook", notebook)

    # a first run interrupted: nothing at all is left
    line = refused(capsys, *args, code=130)
    assert line == "atlas run: interrupted; no partial output was kept"
    assert not results.exists() or files_under(results) == {}, files_under(results)

    # a finished run: its cell and its variant cells are in place together (and a killed run's staging folder,
    # its work folder gone, is removed)
    model = results / "negex" / N100 / "majority"
    killed = model / ".atlas-stage-atlas-run-zero_shot-killed" / "variants" / "zero_shot"
    killed.mkdir(parents=True)
    (killed / "half.json").write_text("{")
    interrupt["now"] = False
    code, _, err = atlas(capsys, *args)
    assert code == 0, err
    before = files_under(results)
    assert sorted(before) == ["negex/atlas-n100-v1/majority/variants/zero_shot/new.json",
                              "negex/atlas-n100-v1/majority/zero_shot.json"], sorted(before)
    (model / "variants" / "zero_shot" / "new.json").rename(model / "variants" / "zero_shot" / "old.json")
    before = files_under(results)

    # the next run interrupted after writing its variants: the previous cell and variants, as they were
    interrupt["now"] = True
    line = refused(capsys, *args, code=130)
    assert line == "atlas run: interrupted; no partial output was kept"
    assert files_under(results) == before
    assert [p.name for p in model.iterdir()] and not list(model.glob(".atlas-stage-*"))


def test_the_local_cluster_leaves_no_scratch_folder(tmp_path, monkeypatch):
    """Dask's scratch space (worker folders, lock files) lives in a folder of the atlas's LocalCluster's own, which
    closing the cluster removes: a build leaves no ``dask-scratch-space`` in the temporary folder."""
    import tempfile

    from distributed import Client, LocalCluster

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cluster = executor._local_cluster(LocalCluster, 1, "1GiB")
    try:
        with Client(cluster) as client:
            assert client.submit(abs, -2).result(timeout=120) == 2
        assert [p.name for p in tmp_path.iterdir()] == [Path(cluster.atlas_scratch).name]
        assert (Path(cluster.atlas_scratch) / "dask-scratch-space").is_dir()
    finally:
        executor._close_cluster(cluster)
    assert list(tmp_path.iterdir()) == []
