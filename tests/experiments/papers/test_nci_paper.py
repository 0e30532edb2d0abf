"""NCI's claims about query generation rest on a generator that works: its queries must find their
documents (BM25) at least half as well as the labelled train queries find theirs."""

from pathlib import Path

import pytest

from longdoc.experiments.families.generative import GENERATIVE
from longdoc.experiments.papers import nci as nci_paper
from longdoc.experiments.profiles import parameters_for
from longdoc.experiments.study import Study

REPO = Path(__file__).parents[3]


def nci_study(dataset, backbone):
    notebook = REPO / "notebooks" / "41_nci_ablation.ipynb"
    overrides = {"dataset": str(dataset), "backbone": backbone, "max_docs": 0, "seeds": [0]}
    return Study(
        "41_nci_ablation",
        parameters_for(REPO / "notebooks/profiles/smoke.yaml", notebook, overrides),
        GENERATIVE,
        progress=False,
    )


@pytest.mark.parametrize("kind", ["the document's opening", "noise"])
def test_the_generator_precondition_reads_whether_generated_queries_find_their_documents(
    tiny_dataset, tiny_backbone, isolated_outputs, monkeypatch, kind
):
    study = nci_study(tiny_dataset, tiny_backbone)
    texts = dict(zip(study.data.doc_ids, study.data.texts))
    queries = {
        d: [" ".join(t.split()[:8]) if kind == "the document's opening" else "zzzq qqqz"] for d, t in texts.items()
    }
    monkeypatch.setattr(nci_paper, "generated_queries", lambda *args: (queries, {}))
    quality = nci_paper.generator_quality(study)
    assert quality["generated queries"] == len(texts)
    condition = nci_paper.generator_works(study)
    assert condition.holds is (kind != "noise")
    assert f"{quality['generated']:.3f}" in condition.what and f"{quality['labelled']:.3f}" in condition.what
    assert quality["generated copied"] == (1.0 if kind != "noise" else 0.0)  # the opening is a verbatim span
    assert 0.0 <= quality["labelled copied"] <= 1.0
    if kind == "noise":
        assert quality["generated"] == 0.0
    claims = {c.against: c for c in nci_paper.ablation_claims(study)}
    assert all(claims[name].precondition == condition for name in nci_paper.GENERATION_ROWS)
    assert claims["w/o PAWA decoder"].precondition is None
    samples = nci_paper.generated_samples(study, documents=2)
    assert len(samples) == 2 and all(
        row["generated queries"] in row["document"] or kind == "noise" for _, row in samples.iterrows()
    )
