"""``python -m longdoc.fetch`` names every hub model a profile's notebooks read, and only those."""

import pytest

from longdoc import fetch


def test_the_paper_profile_needs_bert_base_everywhere_and_doct5query_for_nci():
    named = fetch.models_named(fetch.REPO_ROOT / "notebooks/profiles/paper.yaml", fetch.notebooks())
    assert set(named) == {"bert-base-uncased", "castorini/doc2query-t5-base-msmarco"}
    assert set(named["castorini/doc2query-t5-base-msmarco"]) == {
        "40",
        "41",
        "42",
        "43",
        "44",
        "45",
        "90",
    }  # 90: the ladder's NCI rungs
    assert {"10", "20", "30", "40"} <= set(named["bert-base-uncased"])


def test_the_cpu_profile_and_local_directories_need_nothing(tmp_path, capsys):
    assert fetch.main(["--profile", "cpu"]) == {}
    assert "nothing to fetch" in capsys.readouterr().out
    (tmp_path / "config.json").write_text("{}")
    assert fetch.main(["--profile", "paper", "--only", "10", "--set", f"backbone={tmp_path}", "--list"]) == {}


def test_each_name_is_downloaded_once(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda name: calls.append(name) or f"/cache/{name}")
    named = fetch.main(["--profile", "paper", "--only", "10,40,41"])
    assert calls == list(named) and sorted(calls) == ["bert-base-uncased", "castorini/doc2query-t5-base-msmarco"]
    assert "/cache/bert-base-uncased" in capsys.readouterr().out


def test_an_unknown_notebook_prefix_is_named():
    with pytest.raises(SystemExit, match="no notebook starts with \\['77'\\]"):
        fetch.main(["--profile", "paper", "--only", "10,77", "--list"])
