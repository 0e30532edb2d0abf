import pytest

from longdoc.data import DataFormatError
from longdoc.data.msmarco import load_msmarco_documents, read_msmarco_docs, read_queries_tsv
from longdoc.data.nq320k import load_nq320k
from longdoc.data.pairs import read_gwikimatch, read_pair_tsv, read_smash_pairs
from longdoc.data.trec import read_trec_qrels


def test_msmarco_documents_and_trec_dl(fixtures):
    d = fixtures / "msmarco"
    data = load_msmarco_documents(
        d / "msmarco-docs.tsv.gz",
        {
            "train": (d / "msmarco-doctrain-queries.tsv.gz", d / "msmarco-doctrain-qrels.tsv.gz"),
            "test": (d / "msmarco-test2019-queries.tsv.gz", d / "2019qrels-docs.txt"),
        },
    )
    assert sorted(data.corpus) == ["D1359209", "D1555982", "D301595", "D3300001"]  # the empty D999 is skipped
    assert data.manifest["import_stats"]["skipped_empty"] == 1
    assert data.corpus["D301595"].title == "What is a jar file"
    assert data.qrels["test"]["1037798"] == {"D1555982": 0, "D1359209": 3}
    queries, qrels = data.split("test")
    assert set(queries) == {"1037798", "104861"}


def test_msmarco_docs_wrong_field_count(tmp_path):
    path = tmp_path / "msmarco-docs.tsv"
    path.write_text("D1\turl\ttitle\tbody\nD2\turl\ttitle\n")
    with pytest.raises(DataFormatError, match=r"line 2: expected 4 tab-separated fields"):
        read_msmarco_docs(path)


def test_msmarco_duplicate_docid(tmp_path):
    path = tmp_path / "msmarco-docs.tsv"
    path.write_text("D1\tu\tt\tb\nD1\tu\tt\tb\n")
    with pytest.raises(DataFormatError, match="line 2: duplicate docid 'D1'"):
        read_msmarco_docs(path)


def test_queries_tsv_errors(tmp_path):
    path = tmp_path / "queries.tsv"
    path.write_text("1\tfirst\n1\tagain\n")
    with pytest.raises(DataFormatError, match="line 2: duplicate query id"):
        read_queries_tsv(path)
    path.write_text("1\tfirst\textra\n")
    with pytest.raises(DataFormatError, match="line 1: expected 2"):
        read_queries_tsv(path)


def test_trec_qrels_unknown_ids_error_or_counted_skip(fixtures):
    path = fixtures / "msmarco" / "2019qrels-docs.txt"
    with pytest.raises(DataFormatError, match="line 1: unknown document id 'D1555982'"):
        read_trec_qrels(path, known_docs={"D301595"})
    stats = {}
    qrels = read_trec_qrels(path, known_docs={"D301595"}, on_unknown="skip", stats=stats)
    assert qrels == {"104861": {"D301595": 2}} and stats["skipped_unknown"] == 3


def test_trec_qrels_malformed(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("1 Q0 D1 1\n1 Q0 D2\n")
    with pytest.raises(DataFormatError, match="line 2: expected 4 fields"):
        read_trec_qrels(path)
    path.write_text("1 Q0 D1 1\n1 Q0 D1 2\n")
    with pytest.raises(DataFormatError, match="line 2: duplicate judgement"):
        read_trec_qrels(path)


def test_nq320k_nci_format(fixtures):
    """The text is NQ_doc_content.tsv's (title + abstract + content); a pandas-quoted query is unquoted; a
    document judged by several queries is one document; nq_title_abs.tsv (one row per query, an empty and a
    differing abstract among them) is not read."""
    data = load_nq320k(fixtures / "nq320k")
    assert sorted(data.corpus) == ["0", "1", "2"]
    assert data.corpus["1"].text.endswith("A JAR file is a ZIP archive.")
    assert data.queries["2"] == 'what is a "jar" file'
    assert data.qrels["test"] == {"90": {"0": 1}}
    assert (
        sum(len(q) for q in data.qrels["train"].values()) + sum(len(q) for q in data.qrels["dev"].values()) == 4
    )  # one of them (query 33) in the 5% dev share
    assert data.manifest["semantic_id_columns"] == 1


def test_nq320k_unknown_document(tmp_path, fixtures):
    for name in ("NQ_doc_content.tsv", "nq_train_doc_newid.tsv"):
        (tmp_path / name).write_bytes((fixtures / "nq320k" / name).read_bytes())
    (tmp_path / "nq_dev_doc_newid.tsv").write_text("a question\t91\t77\t1-1\n")
    with pytest.raises(
        DataFormatError, match=r"nq_dev_doc_newid.tsv, line 1: unknown document id '77' \(not in NQ_doc_content.tsv\)"
    ):
        load_nq320k(tmp_path)


def test_nq320k_without_its_content_file_names_it_and_what_title_abs_is(tmp_path, fixtures):
    for name in ("nq_title_abs.tsv", "nq_train_doc_newid.tsv", "nq_dev_doc_newid.tsv"):
        (tmp_path / name).write_bytes((fixtures / "nq320k" / name).read_bytes())
    with pytest.raises(DataFormatError, match=r"NQ_doc_content.tsv: missing: NCI's document text is .*pseudo-queries"):
        load_nq320k(tmp_path)


def test_nq320k_content_rows_repeated_are_folded_when_their_text_agrees(tmp_path, fixtures):
    from longdoc.data.nq320k import convert_nq320k_files

    for name in ("nq_train_doc_newid.tsv", "nq_dev_doc_newid.tsv"):
        (tmp_path / name).write_bytes((fixtures / "nq320k" / name).read_bytes())
    content = (fixtures / "nq320k" / "NQ_doc_content.tsv").read_text()
    first = content.splitlines()[0]
    (tmp_path / "NQ_doc_content.tsv").write_text(content + first + "\n")
    out = tmp_path / "out"
    out.mkdir()
    manifest = convert_nq320k_files(tmp_path, out)
    assert manifest["import_stats"] == {"folded_repeated_documents": 1}
    assert (out / "corpus.jsonl").read_text().count("\n") == 3
    (tmp_path / "NQ_doc_content.tsv").write_text(content + first.replace("lightest", "heaviest") + "\n")
    with pytest.raises(
        DataFormatError, match=r"line 4: document '0' appears again with another text \(first on line 1\)"
    ):
        convert_nq320k_files(tmp_path, out)
    (tmp_path / "NQ_doc_content.tsv").write_text(content.replace("is the lightest", "is\tthe lightest", 1))
    convert_nq320k_files(tmp_path, out)  # a tab inside a text (NCI writes it unescaped) stays in that text
    assert "Hydrogen is the lightest element." in (out / "corpus.jsonl").read_text()
    (tmp_path / "NQ_doc_content.tsv").write_text("0\ttext only\n")
    with pytest.raises(DataFormatError, match=r"line 1: expected 7 tab-separated fields 'docid, -, -, text"):
        convert_nq320k_files(tmp_path, out)


def test_nq320k_a_quoted_field_never_closed_names_its_line(tmp_path, fixtures):
    for name in ("NQ_doc_content.tsv", "nq_dev_doc_newid.tsv"):
        (tmp_path / name).write_bytes((fixtures / "nq320k" / name).read_bytes())
    (tmp_path / "nq_train_doc_newid.tsv").write_text('which element\t1\t0\t2-0-1\n"what is a ""jar\t2\t1\t0-3\n')
    with pytest.raises(DataFormatError, match=r"nq_train_doc_newid.tsv, line 2: a quoted field is malformed"):
        load_nq320k(tmp_path)


def test_gwikimatch_labels_are_binarised(fixtures):
    pairs = read_gwikimatch(fixtures / "pairs" / "gwikimatch_test.tsv")
    assert [p.label for p in pairs] == [1, 0, 1]
    assert pairs[0].source.endswith("Hydrogen") and pairs[0].target.endswith("Helium")


def test_smash_pairs_and_unknown_ids(fixtures):
    path = fixtures / "pairs" / "wiki65k_test.tsv"
    assert [(p.source, p.target, p.label) for p in read_smash_pairs(path)] == [
        ("doc_1", "doc_2", 1),
        ("doc_1", "doc_3", 0),
    ]
    with pytest.raises(DataFormatError, match="line 2: unknown document id 'doc_3'"):
        read_smash_pairs(path, known_ids={"doc_1", "doc_2"})
    stats = {}
    assert len(read_smash_pairs(path, known_ids={"doc_1", "doc_2"}, on_unknown="skip", stats=stats)) == 1
    assert stats["skipped_unknown"] == 1


def test_pairs_duplicate_and_bad_label(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("source-id\ttarget-id\tlabel\na\tb\t1\na\tb\t0\n")
    with pytest.raises(DataFormatError, match="line 3: duplicate pair"):
        read_pair_tsv(path)
    path.write_text("a\tb\tmaybe\n")
    with pytest.raises(DataFormatError, match="line 1: label 'maybe' is not a number"):
        read_pair_tsv(path)


def test_nq320k_refuses_a_query_in_its_train_and_dev_files(tmp_path, fixtures):
    for name in ("NQ_doc_content.tsv", "nq_train_doc_newid.tsv"):
        (tmp_path / name).write_bytes((fixtures / "nq320k" / name).read_bytes())
    (tmp_path / "nq_dev_doc_newid.tsv").write_text("lightest element\t90\t0\t1-1\nwhat is a jar\t2\t1\t0-3\n")
    with pytest.raises(
        DataFormatError,
        match=r"nq_dev_doc_newid.tsv, line 2: query '2' is judged in split 'test' and in split 'train' "
        r"\(.*nq_train_doc_newid.tsv, line 2\)",
    ):
        load_nq320k(tmp_path)
