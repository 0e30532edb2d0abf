"""The README's hyperparameter table is the render of ``paper_recipes`` and the ``paper`` profile, and every
difference from a paper's stated value carries its reason."""

import shutil

from longdoc.experiments import paper_recipes
from longdoc.experiments.paper_recipes import README, README_MARKERS, RECIPES, problems, readme_block


def test_the_readme_shows_the_paper_profile_beside_each_papers_settings():
    text = README.read_text(encoding="utf-8")
    start, end = text.index(README_MARKERS[0]), text.index(README_MARKERS[1]) + len(README_MARKERS[1])
    assert text[start:end] == readme_block(), "run python -m longdoc.experiments.paper_recipes --readme"
    assert {row.paper for row in RECIPES} == {"Longtriever", "SeDR", "SMITH", "NCI"}
    assert {"precision", "train_epochs", "pretrain_epochs", "nci_train_epochs"} <= {row.key for row in RECIPES}


def test_every_difference_from_a_paper_has_its_reason_and_none_is_left_where_they_agree():
    assert problems() == []


def test_a_profile_value_moved_off_the_paper_without_a_reason_is_caught(tmp_path):
    profile = tmp_path / "notebooks" / "profiles" / "paper.yaml"
    profile.parent.mkdir(parents=True)
    shutil.copy(paper_recipes.PAPER_PROFILE, profile)
    for notebook in paper_recipes.REPO_ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"):  # the declared names
        shutil.copy(notebook, tmp_path / "notebooks" / notebook.name)
    text = profile.read_text(encoding="utf-8").replace("mlm_ratio: 0.3", "mlm_ratio: 0.15")
    profile.write_text(text.replace("nci_beam: 100", "nci_beam: 10"), encoding="utf-8")
    found = problems(profile)
    assert len(found) == 2 and any("mlm_ratio" in p for p in found) and any("nci_beam" in p for p in found)
