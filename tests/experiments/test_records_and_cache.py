import json

import pytest

from longdoc.experiments import cache
from longdoc.experiments.records import ConfigMismatchError, ProfileFolderError, check_record_slot, write_metrics


def test_metrics_record_carries_provenance_and_refuses_other_config(tmp_path):
    def write(config, metrics, checksum="abc"):
        return write_metrics(tmp_path / "cpu" / "d" / "01_x", "01_x", "cpu", config, metrics, checksum, [0, 1])

    directory = write({"a": 1}, {"MRR@100": 0.5, "missing": float("nan")})
    text = (directory / "metrics.json").read_text()
    record = json.loads(text)
    assert "NaN" not in text and record["metrics"]["missing"] is None  # valid JSON for every reader
    assert record["config"] == {"a": 1} and record["data_checksum"] == "abc" and record["seeds"] == [0, 1]
    assert "torch" in record["versions"] and "python" in record["versions"] and record["machine"]["cores"] >= 1
    write({"a": 1}, {"MRR@100": 0.6})  # same config: fine
    with pytest.raises(ConfigMismatchError, match=r"another configuration or dataset \(differs in \['a'\]\)"):
        write({"a": 2}, {"MRR@100": 0.7})
    with pytest.raises(ConfigMismatchError, match="dataset"):
        write({"a": 1}, {"MRR@100": 0.7}, checksum="other")
    assert json.loads((directory / "metrics.json").read_text())["metrics"] == {"MRR@100": 0.6}
    smoke = write_metrics(tmp_path / "smoke" / "d" / "01_x", "01_x", "smoke", {"a": 1}, {}, "abc", [0])
    write_metrics(smoke, "01_x", "smoke", {"a": 2}, {}, "abc", [0])  # smoke records are throwaway: replaced
    assert json.loads((smoke / "metrics.json").read_text())["config"] == {"a": 2}


PROFILE_VALUES = {"profile": "cpu", "dataset": "manpages", "max_docs": 0, "train_steps": 32, "patience": 0}


def test_a_profiles_rerun_replaces_its_own_record_whatever_wrote_it_and_says_what(tmp_path):
    folder = tmp_path / "cpu" / "manpages" / "01_x"
    older = {k: v for k, v in PROFILE_VALUES.items() if k != "patience"} | {"train_steps": 24}  # an older profile
    write_metrics(folder, "01_x", "cpu", older, {"MRR@100": 0.1}, "abc", [0])
    record = json.loads((folder / "metrics.json").read_text())
    record["versions"]["git_commit"], record["code_fingerprint"] = "0123456789abcdef", "feedfacefeedface"
    (folder / "metrics.json").write_text(json.dumps(record))
    line = check_record_slot(folder, "cpu", PROFILE_VALUES, "def", PROFILE_VALUES)
    assert line.startswith(f"{folder / 'metrics.json'}, a record of commit 0123456")
    assert "code feedface" in line and "other values of patience, train_steps" in line and "data checksum abc" in line
    write_metrics(folder, "01_x", "cpu", PROFILE_VALUES, {"MRR@100": 0.2}, "def", [0], profile_config=PROFILE_VALUES)
    assert json.loads((folder / "metrics.json").read_text())["config"] == PROFILE_VALUES
    same = check_record_slot(folder, "cpu", PROFILE_VALUES, "def", PROFILE_VALUES)
    assert same is None  # the same commit, code, values and data: nothing to say


@pytest.mark.parametrize("with_record", [True, False], ids=["over a record", "into an empty folder"])
def test_a_run_with_other_values_never_writes_where_the_profiles_records_go(tmp_path, with_record):
    folder = tmp_path / "cpu" / "manpages" / "01_x"
    if with_record:
        write_metrics(
            folder, "01_x", "cpu", PROFILE_VALUES, {"MRR@100": 0.1}, "abc", [0], profile_config=PROFILE_VALUES
        )
    overridden = PROFILE_VALUES | {"train_steps": 4, "command_line": ["train_steps"]}
    with pytest.raises(ProfileFolderError, match=r"own records.*differ.* in \['command_line', 'train_steps'\]"):
        check_record_slot(folder, "cpu", overridden, "abc", PROFILE_VALUES | {"command_line": []})
    with pytest.raises(ProfileFolderError, match="copy notebooks/profiles/cpu.yaml to notebooks/profiles/NAME.yaml"):
        write_metrics(folder, "01_x", "cpu", overridden, {"MRR@100": 0.9}, "abc", [0], profile_config=PROFILE_VALUES)
    if with_record:
        assert json.loads((folder / "metrics.json").read_text())["metrics"] == {"MRR@100": 0.1}
    else:
        assert not folder.exists()
    # other data (--dataset DIR) files under its own folder: written, then guarded like any record
    own = tmp_path / "cpu" / "mine" / "01_x"
    mine = PROFILE_VALUES | {"dataset": "/data/mine"}
    assert check_record_slot(own, "cpu", mine, "xyz", PROFILE_VALUES) is None
    write_metrics(own, "01_x", "cpu", mine, {}, "xyz", [0], profile_config=PROFILE_VALUES)
    write_metrics(own, "01_x", "cpu", mine, {}, "xyz", [0], profile_config=PROFILE_VALUES)  # its own rerun
    with pytest.raises(ConfigMismatchError, match=r"another configuration or dataset \(differs in \['train_steps'\]\)"):
        check_record_slot(own, "cpu", mine | {"train_steps": 4}, "xyz", PROFILE_VALUES)
    # before the data is read (checksum None) the values are compared, the dataset's path is not (moved data)
    with pytest.raises(ConfigMismatchError, match=r"differs in \['train_steps'\]"):
        check_record_slot(own, "cpu", mine | {"train_steps": 4}, None, PROFILE_VALUES)
    assert check_record_slot(own, "cpu", mine | {"dataset": "/moved/mine"}, None, PROFILE_VALUES) is None
    with pytest.raises(ConfigMismatchError, match=r"differs in \['dataset', 'data checksum'\]"):
        check_record_slot(own, "cpu", mine | {"dataset": "/moved/mine"}, "other", PROFILE_VALUES)


def test_a_study_refuses_another_configurations_folder_before_any_work(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    study = tiny_study(tiny_dataset, tiny_backbone, profile="cpu")
    write_metrics(study.directory, "01_baselines", "cpu", dict(study.params, seeds=[7]), {}, study.data.checksum, [7])
    with pytest.raises(ConfigMismatchError, match=r"differs in \['seeds'\]"):
        tiny_study(tiny_dataset, tiny_backbone, profile="cpu").data  # noqa: B018 (loading the data checks the slot)


def test_cache_builds_once_per_key_and_never_keeps_a_failed_build(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    calls = []

    def build(directory):
        calls.append(directory)
        (directory / "artefact").write_text("x")

    first = cache.cached_directory("kind", build, lr=1e-5, data="abc")
    again = cache.cached_directory("kind", build, data="abc", lr=1e-5)
    other = cache.cached_directory("kind", build, lr=2e-5, data="abc")
    assert first == again != other and len(calls) == 2

    def broken(directory):
        (directory / "half").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.cached_directory("kind", broken, lr=3e-5)
    assert sorted((tmp_path / "kind").iterdir()) == sorted([first, other])  # nothing of the failed build is left


def test_a_build_that_fails_on_a_full_disk_says_so_in_one_line_and_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    finished = cache.cached_directory("kind", lambda d: (d / "artefact").write_text("x"), lr=1e-5)

    def torch_on_a_full_disk(directory):  # torch.save's writer loses the errno of a full disk
        (directory / "model.pt").write_text("half")
        raise RuntimeError("basic_ios::clear: iostream error")

    monkeypatch.setattr(cache, "free_bytes", lambda folder: 3 * 2**20)
    with pytest.raises(cache.FileSystemError, match=r"cannot build the kind artefact .*iostream error.* 3 MiB left"):
        cache.cached_directory("kind", torch_on_a_full_disk, lr=2e-5)
    assert sorted((tmp_path / "kind").iterdir()) == [finished]  # the finished artefact stays, the half one is gone
    monkeypatch.setattr(cache, "free_bytes", lambda folder: 10 * 2**30)  # space left: the error is the build's own
    with pytest.raises(RuntimeError, match="^basic_ios::clear: iostream error$"):
        cache.cached_directory("kind", torch_on_a_full_disk, lr=2e-5)
    assert cache.free_bytes(tmp_path / "not" / "made") > 0  # read on the nearest folder that exists


def test_cache_keys_hold_a_fingerprint_of_the_code(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    built = cache.cached_directory("kind", lambda d: None, lr=1e-5)
    assert json.loads((built / "key.json").read_text())["code"] == cache.code_fingerprint()
    package = tmp_path / "package"
    for relative in ["models/a.py", "plots.py", "experiments/report.py", "experiments/cache.py"]:
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text("x = 1\n")
    monkeypatch.setattr(cache, "PACKAGE_DIR", package)
    fingerprint = lambda: (cache.code_fingerprint.cache_clear(), cache.code_fingerprint())[1]  # noqa: E731
    original = fingerprint()
    (package / "plots.py").write_text("x = 2\n")  # presentation only: same artefacts
    (package / "experiments" / "cache.py").write_text("x = 2\n")  # the list itself: keys, not artefacts
    assert fingerprint() == original
    (package / "models" / "a.py").write_text("x = 2\n")  # code that makes artefacts
    assert fingerprint() != original
    cache.code_fingerprint.cache_clear()


MODULE = b'''"""A module."""

import os  # an import


def run(x):
    """Runs."""
    return x + 1  # adds one


@claim_builder
def claims(study):
    """Words the claims."""
    return [Claim("a beats b", "a", "b", "0.4 vs 0.3")]
'''


def test_the_fits_key_reads_what_runs_and_the_verdicts_read_the_claims_wording():
    runs, builders = cache.split_source(MODULE)
    assert runs == b"import os\ndef run(x):\n    return x + 1"  # no comment, docstring, blank line or builder
    assert builders.startswith(b"@claim_builder\ndef claims(study):") and b"a beats b" in builders
    reworded = MODULE.replace(b"Runs.", b"Adds one.").replace(b"# adds one", b"").replace(b"a beats b", b"b loses")
    assert cache.split_source(reworded)[0] == runs and cache.split_source(reworded)[1] != builders
    assert cache.split_source(MODULE.replace(b"x + 1", b"x + 2"))[0] != runs  # code that runs
    unicode = MODULE.replace(b"# an import", "# café: an import".encode())  # comment columns count characters
    assert cache.split_source(unicode)[0] == runs


def test_what_runs_keeps_every_character_of_a_string_and_cuts_only_comments_and_docstrings():
    """Review of the split: a string's blank lines and trailing spaces are code; a line separator that
    str.splitlines breaks at (U+2028) inside a string must not shift a cut; a function with another
    decorator beside @claim_builder is not left out; a module with bare carriage returns is hashed whole."""
    spaced = b'x = """a\n\nb"""\ny = 1  # one\n'
    assert cache.split_source(spaced)[0] == b'x = """a\n\nb"""\ny = 1'
    assert cache.split_source(spaced.replace(b"a\n\nb", b"a\nb"))[0] != cache.split_source(spaced)[0]
    assert cache.split_source(spaced.replace(b"a\n", b"a   \n"))[0] != cache.split_source(spaced)[0]
    separator = "s = 'a\u2028b'\ny = 2  # comment\n".encode()
    assert cache.split_source(separator)[0] == "s = 'a\u2028b'\ny = 2".encode()
    assert cache.split_source(separator.replace(b"y = 2", b"y = 9"))[0] != cache.split_source(separator)[0]
    stacked = MODULE.replace(b"@claim_builder\n", b"@register\n@claim_builder\n")
    assert cache.split_source(stacked)[1] == b"" and b"a beats b" in cache.split_source(stacked)[0]
    assert cache.split_source(b"x = 1\ry = 2  # c\r") == (b"x = 1\ry = 2  # c\r", b"")


def test_a_reworded_claim_keeps_the_fits_and_marks_the_records_stale(tmp_path, monkeypatch):
    package = tmp_path / "package"
    (package / "experiments" / "papers").mkdir(parents=True)
    paper = package / "experiments" / "papers" / "p.py"
    paper.write_bytes(MODULE)
    for relative in cache.VERDICT_MODULES:
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text("x = 1\n")
    monkeypatch.setattr(cache, "PACKAGE_DIR", package)
    monkeypatch.setattr(cache, "REPO_ROOT", tmp_path)

    def both() -> tuple[str, str]:
        cache.code_fingerprint.cache_clear(), cache.verdicts_fingerprint.cache_clear()
        return cache.code_fingerprint(), cache.verdicts_fingerprint()

    code, verdicts = both()
    paper.write_bytes(MODULE.replace(b"a beats b", b"a is better than b"))
    assert both() == (code, both()[1]) and both()[1] != verdicts
    paper.write_bytes(MODULE.replace(b"x + 1", b"x + 2"))
    assert both()[0] != code
    cache.code_fingerprint.cache_clear(), cache.verdicts_fingerprint.cache_clear()


def test_versions_say_whether_the_tree_differed_from_its_commit(tmp_path, monkeypatch):
    import subprocess

    from longdoc.experiments import records as results

    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    assert results.versions()["git_commit"] == "unknown"  # not a repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "lib.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "lib.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=tmp_path, check=True)
    clean = results.versions()
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False
    (tmp_path / "untracked.txt").write_text("results are not code\n")
    assert results.versions()["git_dirty"] is False
    (tmp_path / "lib.py").write_text("x = 2\n")
    assert results.versions()["git_dirty"] is True


def test_the_papers_numbers_are_in_the_verdicts_fingerprint(tmp_path, monkeypatch):
    """A changed paper number changes a claim's paper Δ (so whether it is "underpowered here"): the records
    it made are stale, as after a change to the verdicts' code; the artefacts' key is untouched."""
    from longdoc.experiments import cache

    (tmp_path / "data" / "paper_results").mkdir(parents=True)
    table = tmp_path / "data" / "paper_results" / "sedr.csv"
    table.write_text("system,MRR@100\nSeDR,0.409\n")
    monkeypatch.setattr(cache, "REPO_ROOT", tmp_path)
    cache.verdicts_fingerprint.cache_clear()
    before, code = cache.record_fingerprint(), cache.code_fingerprint()
    table.write_text("system,MRR@100\nSeDR,0.410\n")
    cache.verdicts_fingerprint.cache_clear()
    after = cache.record_fingerprint()
    cache.verdicts_fingerprint.cache_clear()
    assert after != before and after.split("+")[0] == before.split("+")[0] == code


NOT_VERDICTS = {  # modules the verdicts' code imports that change no record's numbers or verdicts, and why
    "analysis/claim_cards.py": "the report's cards, which a test re-renders from the records",
    "experiments/cache.py": "keys and fingerprints",
    "experiments/parameters.py": "reads a profile's parameters, which the record holds itself",
    "experiments/profiles.py": "the profiles' parameters, which the record holds itself",
    "experiments/settings.py": "typed views of the parameters, which the record holds itself",
    "experiments/records.py": "writes the record it is given",
    "experiments/recompute.py": "recomputes from a record; writes none",
    "plots.py": "figures",
}


def test_every_module_behind_a_verdict_is_in_the_verdicts_fingerprint():
    """What the verdicts' modules import, among the modules the artefacts' key leaves out, is in
    :data:`cache.VERDICT_MODULES` (an edit marks the records stale) or says why it changes no record."""
    import ast

    def imported(relative: str) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse((cache.PACKAGE_DIR / relative).read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in (n for n in names if n.startswith("longdoc.")):
                path = name.removeprefix("longdoc.").replace(".", "/")
                found |= {p for p in (f"{path}.py", f"{path}/__init__.py") if (cache.PACKAGE_DIR / p).is_file()}
        return found

    seen, todo = set(), list(cache.VERDICT_MODULES)
    while todo:
        relative = todo.pop()
        if relative not in seen and relative.startswith(cache.PRESENTATION_ONLY):
            seen.add(relative)
            todo += imported(relative)
    missing = sorted(seen - set(cache.VERDICT_MODULES) - set(NOT_VERDICTS))
    assert not missing, f"imported by the verdicts' code, in no fingerprint: {missing}"
    assert set(NOT_VERDICTS) <= seen  # no stale excuse
