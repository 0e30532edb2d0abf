"""The pre-training pages' curation: benchmark quotes, release-track copies, repeated lines, the package cap
and a held-out split by package, each checked against a brute-force reading of what is left."""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from longdoc.data.installed_pages import listing_key, page_packages
from longdoc.data.page_curation import (
    SUBSTANTIVE_WORDS,
    UNKNOWN_PACKAGE,
    benchmark_overlap,
    curate_pages,
    held_out_packages,
    line_key,
    page_family,
)

VOCABULARY = [f"w{i}" for i in range(400)]


def sentence(draw: random.Random, words: int = 12) -> str:
    return " ".join(draw.choices(VOCABULARY, k=words))


def corpus(pages: int = 120, packages: int = 12, seed: int = 0) -> tuple[list[str], list[str], dict[str, str]]:
    draw = random.Random(seed)
    ids = [f"page{i}.1" for i in range(pages)]
    texts = [
        f"description {i}\nOPTIONS\n" + "\n".join(sentence(draw) for _ in range(draw.randint(2, 8)))
        for i in range(pages)
    ]
    return ids, texts, {doc_id: f"pkg{i % packages}" for i, doc_id in enumerate(ids)}


def substantive_lines(text: str) -> set[str]:
    return {key for key in map(line_key, text.split("\n")) if key}


def test_a_line_is_substantive_from_the_word_count_up():
    assert line_key("OPTIONS") is None and line_key("--help Print a usage message") is None
    assert line_key("  One  two three four five six seven EIGHT ") == "one two three four five six seven eight"
    assert SUBSTANTIVE_WORDS == 8


@pytest.mark.parametrize(
    "doc_id, family",
    [
        ("gcloud_beta_compute_ssh.1", ("gcloud_compute_ssh.1", 1)),
        ("gcloud_alpha_compute_ssh.1", ("gcloud_compute_ssh.1", 2)),
        ("gcloud_compute_ssh.1", ("gcloud_compute_ssh.1", 0)),
        ("gcloud_alpha.1", ("gcloud.1", 2)),
        ("git-commit.1", ("git-commit.1", 0)),
        ("EVP_DigestInit.3ssl", ("EVP_DigestInit.3ssl", 0)),
    ],
)
def test_release_tracks_name_one_family(doc_id, family):
    assert page_family(doc_id) == family


def test_a_page_that_is_or_quotes_a_benchmark_document_is_found():
    body = "SYNOPSIS\nint open(const char *path, int flags, mode_t mode, and more words);\nOPTIONS"
    ids = ["open.2", "quote.3", "same.3", "heading.1", "clean.1"]
    texts = [
        "x",
        "other text\nint  open(const char *PATH, int flags, mode_t mode, and more words);",  # one line, case apart
        f"open a file\n{body}",  # rendered: a description line, then the benchmark's body
        "something else\nOPTIONS\nSYNOPSIS",  # headings alone are no quote
        "nothing from the benchmark in eight words or more here",
    ]
    assert benchmark_overlap(ids, texts, {"open.2"}, [body]) == ["open.2", "quote.3", "same.3"]


def test_curation_keeps_one_release_track_and_no_repeated_line():
    draw = random.Random(1)
    shared = sentence(draw)  # a flag paragraph every page repeats
    ids = ["gcloud_alpha_x.1", "gcloud_beta_x.1", "gcloud_x.1", "gcloud_alpha_y.1", "gcloud_beta_y.1", "ls.1"]
    texts = [f"page {i}\n{shared}\n{sentence(draw, 30)}" for i in range(len(ids))]
    packages = {doc_id: "gcloud" if doc_id.startswith("gcloud") else "coreutils" for doc_id in ids}
    curated = curate_pages(ids, texts, packages, set(), [], held_out_share=0.2, max_package_share=0.9)
    assert curated.ids == ["gcloud_beta_y.1", "gcloud_x.1", "ls.1"]  # GA first, then beta
    assert curated.report["dropped_as_release_track_copies"] == 3
    assert sum(shared in text for text in curated.texts) == 1  # the first page (by id) keeps it
    assert curated.report["repeated_lines_removed"] == 2


def test_curation_leaves_no_package_over_its_cap_and_no_line_or_package_across_the_split():
    ids, texts, packages = corpus()
    for i in range(0, 120, 3):  # one package owns a third of the pages, each twice as long
        packages[ids[i]] = "big"
        texts[i] = texts[i] + "\n" + texts[i].split("\n", 1)[1].replace("w", "v")
    draw = random.Random(7)
    for i in range(5, 120, 10):  # repeated lines across pages and packages
        texts[i] += "\n" + texts[i - 4].split("\n")[2]
    benchmark = [sentence(draw) + "\n" + texts[13].split("\n")[2]]  # page13 quotes the benchmark
    curated = curate_pages(ids, texts, packages, set(), benchmark, held_out_share=0.1, max_package_share=0.2)
    assert curated.report["dropped_as_benchmark_text"] == ["page13.1"]
    sizes = Counter()
    for doc_id, text in zip(curated.ids, curated.texts):
        sizes[packages[doc_id]] += len(text)
    total = sum(sizes.values())
    assert max(sizes.values()) <= 0.2 * total + 1 and sizes["big"] > 0.15 * total  # capped, not emptied
    assert curated.report["dropped_by_package_cap"]["big"] > 0
    train = [t for t, held in zip(curated.texts, curated.held_out) if not held]
    held = [t for t, flag in zip(curated.texts, curated.held_out) if flag]
    assert train and held
    seen = Counter(line for text in curated.texts for line in substantive_lines(text))
    assert max(seen.values()) == 1  # no substantive line twice anywhere, so none across the split
    held_packages = {packages[d] for d, flag in zip(curated.ids, curated.held_out) if flag}
    train_packages = {packages[d] for d, flag in zip(curated.ids, curated.held_out) if not flag}
    assert not held_packages & train_packages and "big" not in held_packages
    assert sum(map(len, held)) >= 0.1 * total
    assert curated.report["held_out_packages"] == sorted(held_packages)


def test_held_out_packages_reach_the_share_and_skip_a_package_over_twice_it():
    sizes = {f"p{i}": 10 for i in range(50)} | {"huge": 500}
    held = held_out_packages(sizes, 0.05)
    assert "huge" not in held and sum(sizes[p] for p in held) >= 0.05 * 1000
    assert sum(sizes[p] for p in held) - 10 < 0.05 * 1000  # it stops at the share


def test_bad_shares_are_refused_naming_them():
    with pytest.raises(ValueError, match="max_package_share"):
        curate_pages(["a"], ["a b"], {}, set(), [], held_out_share=0.02, max_package_share=1.0)


def test_a_page_without_a_package_counts_as_one_package():
    ids, texts, _ = corpus(40)
    curated = curate_pages(ids, texts, {}, set(), [], held_out_share=0.1, max_package_share=0.5)
    assert curated.report["largest_packages"] == {UNKNOWN_PACKAGE: 1.0}
    assert not any(curated.held_out)  # one package, over twice the share: nothing can be held out


def test_page_packages_read_dpkg_file_lists(tmp_path):
    info = tmp_path / "info"
    info.mkdir()
    (info / "git-man.list").write_text("/usr/share/man/man1/git.1.gz\n/usr/share/doc/git\n")
    (info / "libc:amd64.list").write_text("/usr/share/man/man3/open.3.gz\n")
    paths = [
        Path(p) for p in ("/usr/share/man/man1/git.1.gz", "/usr/share/man/man3/open.3.gz", "/usr/share/man/man1/x.1")
    ]
    assert page_packages(paths, info) == {"git.1": "git-man", "open.3": "libc"}


def test_the_listing_key_reads_contents_not_times(tmp_path):
    page = tmp_path / "ls.1"
    page.write_text("list")
    key = listing_key([page])
    os.utime(page, (1, 1))
    assert listing_key([page]) == key
    page.write_text("list directory contents")
    assert listing_key([page]) != key
