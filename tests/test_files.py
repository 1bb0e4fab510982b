"""Files that exist only whole: ``replacing`` renames on success and leaves nothing on failure."""

import pytest
import srsly

from spacy_elmo.files import replacing, write_json_atomically


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_write_leaves_no_partial_target_and_no_temporary_file(tmp_path, existed):
    target = tmp_path / "vocab.txt"
    if existed:
        target.write_text("old\n", encoding="utf-8")
    with pytest.raises(OSError, match="disk full"):
        with replacing(target) as temporary:
            temporary.write_text("half a fil", encoding="utf-8")
            raise OSError("disk full (simulated)")
    assert sorted(tmp_path.iterdir()) == ([target] if existed else [])
    if existed:
        assert target.read_text(encoding="utf-8") == "old\n"


def test_a_finished_write_replaces_the_target_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("{}", encoding="utf-8")
    write_json_atomically(target, {"steps": 2})
    with replacing(tmp_path / "chunk.hdf5", ".host-1.tmp", fsync=True) as temporary:
        assert temporary.name == "chunk.hdf5.host-1.tmp"
        temporary.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chunk.hdf5", "summary.json"]
    assert srsly.read_json(target) == {"steps": 2}
