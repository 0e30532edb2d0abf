import os
import shutil

import pytest

from longdoc.data import load_beir, load_pairs
from longdoc.data.manpages import build_manpages, parse_rendered, split_of
from longdoc.data.see_also_pairs import PairThresholds, build_see_also_pairs, jaccard

needs_man = pytest.mark.skipif(shutil.which("man") is None, reason="needs man/groff")

PAGE = """.TH {NAME} {S} 2023-01-01 "test" "Test Manual"
.SH NAME
{name} \\- {description}
.SH SYNOPSIS
.B int {name}(void);
.SH DESCRIPTION
The
.BR {name} ()
function is documented here with enough words to be a document about {name}.
.SH SEE ALSO
{see_also}
"""


def write_page(directory, name, section, description, see_also):
    refs = ",\n".join(f".BR {r} ({s})" for r, s in see_also)
    (directory / f"man{section}").mkdir(exist_ok=True)
    path = directory / f"man{section}" / f"{name}.{section}"
    path.write_text(PAGE.format(NAME=name.upper(), S=section, name=name, description=description, see_also=refs))
    return path


@pytest.fixture
def page_dir(tmp_path):
    root = tmp_path / "man"
    root.mkdir()
    write_page(root, "alpha", 3, "compute the alpha value", [("beta", 3), ("gammaalias", 3), ("delta", 7)])
    write_page(root, "beta", 3, "compute the alpha value", [("alpha", 3), ("gamma", 3)])
    write_page(root, "gamma", 3, "print a gamma message", [("alpha", 3), ("beta", 3)])
    write_page(root, "delta", 7, "overview of delta things", [("alpha", 3)])
    (root / "man3" / "gammaalias.3").write_text('.\\" an alias page\n.so man3/gamma.3\n')
    os.symlink("alpha.3", root / "man3" / "alpha2.3")
    return root


@needs_man
def test_builds_documents_queries_and_links(page_dir, tmp_path):
    out = build_manpages(tmp_path / "built", source=page_dir, progress=False, workers=2)
    data = load_beir(out)
    assert sorted(data.corpus) == ["alpha.3", "beta.3", "delta.7", "gamma.3"]  # aliases are not documents
    assert data.corpus["alpha.3"].title == "alpha(3)"
    text = data.corpus["alpha.3"].text
    assert "function is documented here" in text and "compute the alpha value" not in text  # NAME excluded
    assert "SEE ALSO" in text
    # alpha and beta share a description: one query, both relevant
    assert len(data.queries) == 3
    shared = [q for q, t in data.queries.items() if t == "compute the alpha value"][0]
    split = split_of(shared)
    assert data.qrels[split][shared] == {"alpha.3": 1, "beta.3": 1}
    counts = data.manifest["counts"]
    assert counts["aliases"] == 2 and counts["documents"] == 4
    assert "checksum" in data.manifest and data.manifest["files"]["corpus.jsonl"]


@needs_man
def test_build_is_byte_identical(page_dir, tmp_path):
    first = build_manpages(tmp_path / "a", source=page_dir, progress=False)
    second = build_manpages(tmp_path / "b", source=page_dir, progress=False)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@needs_man
def test_alias_links_resolve_in_pairs(page_dir, tmp_path):
    out = build_manpages(tmp_path / "built", source=page_dir, progress=False)
    pairs = [p for rows in load_pairs(out).values() for p in rows]
    # alpha -> {beta, gamma (via the .so alias), delta}; beta -> {alpha, gamma}; Jaccard(alpha, beta) = 3/4
    assert any(p.source == "alpha.3" and p.target == "beta.3" and p.label == 1 for p in pairs)


def test_parse_rendered_drops_header_footer_and_name():
    rendered = "FOO(1)   General Commands   FOO(1)\n\nNAME\n       foo - frob the\n       widgets\n\nDESCRIPTION\n       Frobs   things.\n\nSEE ALSO\n       bar(1), baz(5)\n\nLinux 6.0   2023-01-01   FOO(1)\n"
    page = parse_rendered("foo.1", rendered)
    assert page.description == "frob the widgets"
    assert page.text == "DESCRIPTION\nFrobs things.\nSEE ALSO\nbar(1), baz(5)"
    assert page.see_also == ("bar.1", "baz.5") and page.title == "foo(1)"


def test_see_also_pairs_thresholds_and_negatives():
    links = {"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b", "x"}, "x": {"y"}, "y": {"x"}}
    pairs, counts = build_see_also_pairs(links, PairThresholds(0.5, 0.1))
    flat = {(p.source, p.target): p.label for rows in pairs.values() for p in rows}
    assert jaccard({"a", "b", "c"}, {"b", "a", "c"}) == 1.0
    assert flat[("a", "b")] == 1 and flat[("x", "y")] == 1
    for (s, t), label in flat.items():
        assert s < t or label == 0
    negatives = [(s, t) for (s, t), label in flat.items() if label == 0]
    for s, t in negatives:  # negatives come from links of the pair and are dissimilar to the source
        assert jaccard(links[s] | {s}, links[t] | {t}) < 0.1
    assert counts["positive_pairs"] == sum(flat.values())


def test_every_positive_gets_one_negative_from_the_first_tier_that_has_one(tmp_path):
    from longdoc.data.see_also_pairs import NEGATIVE_TIERS, save_links

    links = {
        "a": {"b", "c"},
        "b": {"a", "c"},
        "c": {"a", "b"},
        "d": {"e"},
        "e": {"f"},
        "f": set(),
        "g": set(),
        "h": set(),
    }
    pairs, counts = build_see_also_pairs(links, PairThresholds(0.5, 0.1))
    flat = [p for rows in pairs.values() for p in rows]
    assert counts["negative_pairs"] == counts["positive_pairs"] == sum(p.label for p in flat)
    assert sum(counts["negatives_per_tier"].values()) == counts["negative_pairs"]
    assert set(counts["negatives_per_tier"]) == set(NEGATIVE_TIERS)
    for pair in flat:
        if pair.label == 0:
            assert jaccard(links[pair.source] | {pair.source}, links[pair.target] | {pair.target}) < 0.1
    assert counts["negatives_per_tier"]["random page"] >= 1  # a, b, c link only among themselves
    linking = save_links(links, tmp_path)
    written = [
        line.split("\t")
        for split in ("train", "dev", "test")
        for line in (tmp_path / "links" / f"{split}.tsv").read_text().splitlines()[1:]
    ]
    assert sorted(tuple(w) for w in written) == sorted((s, t) for s, ts in links.items() for t in ts)
    assert sum(linking.values()) == sum(bool(t) for t in links.values())
