"""The tables are the one source of what a notebook runs: every notebook that fits rows has one, each
in its paper module, and the maps kept below the papers' layer (the dataset role by notebook number, the
claim cards' notebooks, the report's headline notebooks) agree with them."""

import json

import pandas as pd
import pytest

from longdoc.analysis.claim_cards import CARDS_DIR, PAPERS
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.papers import catalogue
from longdoc.experiments.profiles import dataset_role
from longdoc.experiments.systems import Table

NOTEBOOKS = REPO_ROOT / "notebooks"


def notebook_code(notebook: str) -> str:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_every_notebook_that_fits_rows_runs_its_table():
    fitting = sorted(
        p.stem
        for p in NOTEBOOKS.glob("[0-8]*.ipynb")
        if any(call in notebook_code(p.stem) for call in ("run_table(", "run_all(", "budget_search("))
    )
    assert fitting == sorted(catalogue.TABLES)
    for notebook in fitting:  # its table, at the notebook's budget or at each budget a search tries
        code = notebook_code(notebook)
        assert "run_table(" in code or "budget_search(" in code, notebook
        assert "run_all(" not in code and "study.run(" not in code, notebook
        if "table_findings(" in code:  # its verdicts are its table's claims
            assert catalogue.table(notebook).claims is not None, notebook


@pytest.mark.parametrize("notebook", sorted(catalogue.TABLES))
def test_a_tables_family_reads_the_dataset_of_its_notebooks_role(notebook):
    assert dataset_role(notebook) == catalogue.table(notebook).family.role


def test_the_claim_cards_name_notebooks_with_claims():
    for paper in PAPERS:
        card = pd.read_csv(CARDS_DIR / f"{paper}.csv")
        for notebook in set(card["notebook"]):
            assert notebook in catalogue.TABLES and catalogue.table(notebook).claims is not None, (paper, notebook)


def test_the_reports_headline_notebooks_are_tables():
    source = (REPO_ROOT / "lib" / "longdoc" / "experiments" / "report.py").read_text()
    named = {n for n in catalogue.TABLES if f'"{n}"' in source}
    assert named and named <= {h.notebook for h in catalogue.HEADLINES}  # its scale lines read headline notebooks


def test_a_table_refuses_an_unknown_seed_policy_and_an_unknown_notebook():
    with pytest.raises(ValueError, match="seeds='some'"):
        Table("99_x", None, lambda study: [], seeds="some")
    with pytest.raises(KeyError, match="no table for notebook '99_x'"):
        catalogue.table("99_x")


def test_a_claimed_table_runs_every_seed_for_the_rows_its_claims_compare_and_one_for_the_others():
    """Every claim has two runs a side; the sweep's other points keep the first seed (a trend only)."""
    from types import SimpleNamespace

    from longdoc.experiments.systems import System
    from longdoc.experiments.verdicts import Claim

    rows = [System(name, None) for name in ("base", "a", "b", "c")]
    table = Table(
        "99_x",
        None,
        lambda study: rows,
        claims=lambda study, rows: [Claim("base beats a", "base", "a")],
        seeds="claimed",
    )
    runs = {row.name: seeds for row, seeds in table.runs(SimpleNamespace(seeds=[0, 1, 2]))}
    assert runs == {"base": [0, 1, 2], "a": [0, 1, 2], "b": [0], "c": [0]}
    with pytest.raises(ValueError, match="seeds='claimed' needs the table's claims"):
        Table("99_x", None, lambda study: rows, seeds="claimed")
