"""The pre-training corpus of this machine's other man pages: outside the benchmark's files, aliases not
documents, built once per listing, and refused (with what to do) where too few pages are installed."""

import json
import os
import shutil

import pytest

from longdoc.data import installed_pages
from longdoc.data.installed_pages import INSTALLED_PAGES, installed_page_corpus

needs_man = pytest.mark.skipif(shutil.which("man") is None, reason="needs man/groff")

PAGE = """.TH {NAME} 1 2023-01-01 "test" "Test Manual"
.SH NAME
{name} \\- {description}
.SH DESCRIPTION
The
.B {name}
command is documented here with enough words to be a page about {name}.
"""


@pytest.fixture
def man_root(tmp_path):
    root = tmp_path / "man"
    (root / "man1").mkdir(parents=True)
    for name in ("alpha", "beta", "gamma", "benchmarked"):
        (root / "man1" / f"{name}.1").write_text(PAGE.format(NAME=name.upper(), name=name, description=f"run {name}"))
    os.symlink("alpha.1", root / "man1" / "alpha2.1")  # an alias: not a document
    return root


@needs_man
def test_the_other_pages_become_a_corpus_once_per_listing(man_root, tmp_path, monkeypatch):
    monkeypatch.setattr(installed_pages, "FEWEST_PAGES", 2)
    exclude = {str(man_root / "man1" / "benchmarked.1")}  # a file of the benchmark's packages
    ids, texts = installed_page_corpus(tmp_path / "data", man_root, exclude, progress=False, workers=2)
    assert ids == ["alpha.1", "beta.1", "gamma.1"]
    assert texts[0].startswith("alpha(1) run alpha\n") and "enough words to be a page about alpha" in texts[0]
    (built,) = (tmp_path / "data" / INSTALLED_PAGES).iterdir()
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["documents"] == 3 and manifest["aliases"] == 1 and manifest["not_rendered"] == 0

    monkeypatch.setattr(installed_pages, "render", lambda path: pytest.fail("rendered again"))
    assert installed_page_corpus(tmp_path / "data", man_root, exclude, progress=False)[0] == ids  # reused
    (man_root / "man1" / "delta.1").write_text(PAGE.format(NAME="DELTA", name="delta", description="run delta"))
    with pytest.raises(pytest.fail.Exception, match="rendered again"):  # a new listing is a new corpus
        installed_page_corpus(tmp_path / "data", man_root, exclude, progress=False)


@needs_man
def test_too_few_pages_say_what_to_do(man_root, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"pretrain_corpus='installed-manpages': only 4 man pages outside "
        r"manpages, manpages-dev render on this machine .*pretrain_corpus=''",
    ):
        installed_page_corpus(tmp_path / "data", man_root, set(), progress=False)
    assert not list((tmp_path / "data").rglob("*.jsonl"))  # nothing half-written


def test_pretraining_reads_them_by_name(monkeypatch):
    from longdoc.experiments.families import pretraining

    monkeypatch.setattr(pretraining, "installed_page_corpus", lambda data_dir: (["a.1"], ["a(1) text"]))
    assert pretraining.pretraining_texts(INSTALLED_PAGES) == (["a.1"], ["a(1) text"])
