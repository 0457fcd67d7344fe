"""The check that an output can be written (placement.whole_file.probe_writable): it fails as the write would,
and leaves every file as it was."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from placement.whole_file import probe_writable


def test_a_file_another_process_made_meanwhile_is_kept(tmp_path, monkeypatch):
    """The file appears between the look for it and the probe's open (here: the look is told it is not there):
    the probe created nothing, so it removes nothing (it removed the file, another run's log among them)."""
    log = tmp_path / "run.log"
    log.write_text("another run's line\n")
    monkeypatch.setattr(os.path, "exists", lambda path: False)
    probe_writable(log, replaced=False)
    assert log.read_text() == "another run's line\n"


def test_a_created_file_is_removed_and_a_link_kept(tmp_path):
    link, target = tmp_path / "link.json", tmp_path / "target.json"
    link.symlink_to(target)
    probe_writable(link)
    probe_writable(tmp_path / "new.json")
    assert link.is_symlink() and not target.exists() and not (tmp_path / "new.json").exists()


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs UNIX sockets")
def test_a_socket_is_no_file_to_write(tmp_path):
    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(OSError) as caught:
            probe_writable(path)
        assert caught.value.errno == errno.ENXIO
    finally:
        server.close()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that permissions bind")
def test_a_file_in_a_folder_that_takes_no_new_file_is_refused(tmp_path):
    """The write replaces the file through a scratch file beside it, so the folder must take one; a log is
    appended to, and the file alone must be writable."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "out.json").write_text("{}")
    folder.chmod(0o555)
    try:
        with pytest.raises(OSError) as caught:
            probe_writable(folder / "out.json")
        assert caught.value.errno == errno.EACCES
        probe_writable(folder / "out.json", replaced=False)
    finally:
        folder.chmod(0o755)


def test_a_path_through_a_missing_folder_is_refused_though_dot_dot_leaves_it(tmp_path):
    """``missing/../out.json`` cannot be written (the system resolves ``missing`` first), though its real path
    names a file that exists: the check passed, and the solve ran in full before its write failed."""
    (tmp_path / "out.json").write_text("{}")
    through = os.path.join(tmp_path, "missing", "..", "out.json")
    with pytest.raises(OSError) as caught:
        probe_writable(through)
    assert caught.value.errno == errno.ENOENT and caught.value.filename == through
    with pytest.raises(OSError):
        open(through, "a").close()   # as the write itself fails
    assert (tmp_path / "out.json").read_text() == "{}"
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError) as caught:
        probe_writable(os.path.join(tmp_path, "file", "out.json"))
    assert caught.value.errno == errno.ENOTDIR


def test_a_file_named_through_a_link_is_replaced_whole_and_the_link_kept(tmp_path):
    """A link to a file was written through: a write that failed half way (a full disk) left the file cut short,
    its old content lost. The file the link leads to is now replaced whole, the link kept; a failed write leaves
    it as it was and no scratch file."""
    from placement.whole_file import replacing

    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target.name)
    with pytest.raises(OSError, match="disk full"):
        with replacing(link) as fh:
            fh.write("half of the new")
            fh.flush()
            raise OSError(errno.ENOSPC, "disk full")
    assert (target.read_text(), sorted(p.name for p in tmp_path.iterdir())) == ("old", ["link.json", "target.json"])
    with replacing(link) as fh:
        fh.write("new")
    assert (link.is_symlink(), target.read_text()) == (True, "new")
