import hashlib

import pytest

from atlaslib import sources


def test_local_file_is_verified(tmp_path, refused_url):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_bytes(b"hello")
    pf = sources.PinnedFile("d/f.txt", f"{refused_url}/f.txt", hashlib.sha256(b"hello").hexdigest())
    assert sources.resolve(pf, tmp_path) == (tmp_path / "d" / "f.txt").resolve()


def test_sha_mismatch_names_file_url_expected_actual_and_fix(tmp_path, refused_url):
    (tmp_path / "f.txt").write_bytes(b"tampered")
    pf = sources.PinnedFile("f.txt", f"{refused_url}/f.txt", "0" * 64)
    with pytest.raises(sources.DataSourceError) as e:
        sources.resolve(pf, tmp_path)
    msg = str(e.value)
    for part in ("f.txt", f"{refused_url}/f.txt", "0" * 64, hashlib.sha256(b"tampered").hexdigest(),
                 "To place it by hand"):
        assert part in msg


def test_no_network_gives_one_clear_message(tmp_path, monkeypatch, refused_url):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ATLAS_DATA_DIR", raising=False)
    pf = sources.PinnedFile("x/y.txt", f"{refused_url}/y.txt", "a" * 64)  # a bound port nobody listens on
    with pytest.raises(sources.DataSourceError) as e:
        sources.resolve(pf)
    msg = str(e.value)
    assert f"could not download x/y.txt from {refused_url}/y.txt" in msg and "a" * 64 in msg
    assert not list((tmp_path / "cache").rglob("*.part"))  # no partial file left behind
