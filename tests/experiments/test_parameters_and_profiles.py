"""One name per concept: every notebook parameter and profile key is in the glossary, with checked values."""

from pathlib import Path

import pytest

from longdoc.experiments.parameters import PARAMETERS, check_parameters
from longdoc.experiments.profiles import ProfileError, load_profile, notebook_parameters, parameters_for

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_parameter_is_a_known_concept(notebook):
    assert set(notebook_parameters(notebook)) <= set(PARAMETERS)


def test_values_are_checked_and_named():
    assert check_parameters({"learning_rates": [1, 2e-5], "batch_size": 4}) == {
        "learning_rates": [1.0, 2e-5],
        "batch_size": 4,
    }
    for bad, message in [
        ({"batch_size": True}, "batch_size=True"),
        ({"learning_rates": ["a"]}, r"learning_rates\[0\]"),
        ({"mlm_ratio": 1.5}, "mlm_ratio=1.5"),
        ({"segment_length": 64}, "unknown parameter"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_parameters(bad)


def write_profile(tmp_path, text):
    notebooks = tmp_path / "notebooks"
    (notebooks / "profiles").mkdir(parents=True)
    for notebook in NOTEBOOKS:
        (notebooks / notebook.name).write_text(notebook.read_text())
    path = notebooks / "profiles" / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("batch_sise: 4\n", "batch_sise"),
        ("batch_size: 4\nbatch_size: 5\n", "duplicate key 'batch_size'"),
        ("batch_size: four\n", "batch_size='four'"),
        ("notebooks:\n  10_longtriever_mian: {batch_size: 4}\n", "10_longtriever_mian"),
        ("notebooks:\n  10_longtriever_main: {learning_rate: 1.0e-4}\n", "learning_rate"),
        ("batch_size: [4\n", "p.yaml"),
        ("", "the profile is empty"),
        ("- 4\n", "expected a mapping"),
    ],
)
def test_a_bad_profile_names_its_file_and_the_problem(tmp_path, text, message):
    with pytest.raises(ProfileError, match=message):
        load_profile(write_profile(tmp_path, text))


def test_the_block_size_of_one_notebook_can_differ(tmp_path):
    profile = load_profile(ROOT / "notebooks" / "profiles" / "cpu.yaml")
    efficiency = parameters_for(
        ROOT / "notebooks" / "profiles" / "cpu.yaml", ROOT / "notebooks" / "14_efficiency.ipynb"
    )
    assert efficiency["block_size"] == profile["notebooks"]["14_efficiency"]["block_size"] != profile["block_size"]


def role_dirs(tmp_path):
    """A retrieval folder (judgements) and a matching folder (pairs), empty otherwise."""
    retrieval, matching = tmp_path / "msmarco", tmp_path / "wiki65k"
    (retrieval / "qrels").mkdir(parents=True)
    (matching / "pairs").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (matching / "pairs" / f"{split}.tsv").write_text("")
    return retrieval, matching


def test_each_notebook_reads_the_dataset_of_its_role(tmp_path):
    from longdoc.experiments.profiles import dataset_role

    assert [dataset_role(f"{n}_x") for n in ("00", "14", "24", "31", "45", "90")] == [
        "retrieval", "retrieval", "retrieval", "matching", "nci", None
    ]  # fmt: skip
    retrieval, matching = role_dirs(tmp_path)
    profile, notebooks = ROOT / "notebooks" / "profiles" / "paper.yaml", ROOT / "notebooks"
    roles = {"datasets": {"retrieval": str(retrieval), "matching": str(matching), "nci": str(retrieval)}}
    read = {
        nb: parameters_for(profile, notebooks / f"{nb}.ipynb", roles)["dataset"]
        for nb in ("10_longtriever_main", "30_smith_main", "40_nci_main")
    }
    assert read == {
        "10_longtriever_main": str(retrieval),
        "30_smith_main": str(matching),
        "40_nci_main": str(retrieval),
    }
    assert parameters_for(profile, notebooks / "90_budget_ladder.ipynb", roles)["datasets"] == roles["datasets"]
    # --dataset (every notebook) wins over a role's dataset
    both = roles | {"dataset": str(matching)}
    assert parameters_for(profile, notebooks / "30_smith_main.ipynb", both)["dataset"] == str(matching)


def test_a_notebook_given_the_wrong_kind_of_dataset_fails_at_once_naming_it(tmp_path):
    retrieval, _ = role_dirs(tmp_path)
    profile, notebook = ROOT / "notebooks" / "profiles" / "paper.yaml", ROOT / "notebooks" / "30_smith_main.ipynb"
    with pytest.raises(
        ProfileError, match=r"30_smith_main reads a matching dataset, but .*msmarco has no pairs/train.tsv"
    ):
        parameters_for(profile, notebook, {"datasets": {"matching": str(retrieval)}})
    with pytest.raises(ValueError, match=r"parameter datasets: unknown key\(s\) \['msmarco'\]"):
        check_parameters({"datasets": {"msmarco": str(retrieval)}})


def test_the_ladders_headlines_read_their_roles_datasets(tmp_path):
    from longdoc.experiments.papers import ladder

    retrieval, matching = role_dirs(tmp_path)
    params = parameters_for(
        ROOT / "notebooks" / "profiles" / "cpu.yaml",
        ROOT / "notebooks" / "90_budget_ladder.ipynb",
        {"datasets": {"matching": str(matching)}},
    )
    headlines = {h.key: h for h in ladder.HEADLINES}
    assert ladder.rung_parameters(params, headlines["smith"], 1, 1)["dataset"] == str(matching)
    assert ladder.rung_parameters(params, headlines["sedr"], 1, 1)["dataset"] == "manpages"


def test_the_query_generator_batch_of_the_rule_is_the_generators():
    from longdoc.experiments.parameters import QG_BATCH
    from longdoc.models.doc2query import QueryGenerationConfig

    assert QueryGenerationConfig().batch_size == QG_BATCH


def test_a_set_value_that_looks_like_a_date_stays_a_string():
    from longdoc.experiments.profiles import command_line_value

    assert command_line_value("dataset=2024-01-01") == ("dataset", "2024-01-01")  # YAML 1.1: a date
    assert command_line_value("pooling==") == ("pooling", "=")  # YAML 1.1: the value key


def test_the_pretraining_corpus_is_a_dataset_role_of_its_own(tmp_path):
    """``--data pretraining=PATH`` (``datasets.pretraining``) is every pre-training notebook's corpus, under a
    value that notebook's own entry or the command line gives ``pretrain_corpus``."""
    corpus = tmp_path / "books_and_wiki.txt"
    corpus.write_text("A first document.\n\nA second one.\n", encoding="utf-8")
    paper, notebooks = ROOT / "notebooks" / "profiles" / "paper.yaml", ROOT / "notebooks"
    roles = {"datasets": {"pretraining": str(corpus)}}
    assert parameters_for(paper, notebooks / "10_longtriever_main.ipynb", roles)["pretrain_corpus"] == str(corpus)
    assert parameters_for(paper, notebooks / "11_longtriever_ablation.ipynb", roles)["pretrain_corpus"] == str(corpus)
    assert "pretrain_corpus" not in parameters_for(paper, notebooks / "30_smith_main.ipynb", roles)  # its pairs' pages
    assert parameters_for(paper, notebooks / "10_longtriever_main.ipynb")["pretrain_corpus"] == ""
    chosen = parameters_for(paper, notebooks / "10_longtriever_main.ipynb", roles | {"pretrain_corpus": "unjudged"})
    assert chosen["pretrain_corpus"] == "unjudged"
