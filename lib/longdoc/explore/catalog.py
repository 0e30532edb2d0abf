"""Which systems the explorer can show: the rows of the notebooks that train them, each either ready
(every artefact it needs is in the cache) or missing, with the notebook that makes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.cache import NotCached, cache_only
from longdoc.experiments.families.generative import Generative
from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.papers.catalogue import TABLES
from longdoc.experiments.profiles import parameters_for
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System

NOTEBOOKS = REPO_ROOT / "notebooks"


EXPLORED = (
    "01_baselines",
    "10_longtriever_main",
    "20_sedr_main",
    "21_sedr_interaction",
    "40_nci_main",
)  # their tables' rows


@dataclass
class Entry:
    """One system the explorer lists: its study (the notebook's parameters under the profile) and,
    where it is not ready, why."""

    name: str
    notebook: str
    system: System
    study: Study
    missing: str = ""

    @property
    def ready(self) -> bool:
        return not self.missing

    @property
    def kind(self) -> str:
        spec = self.system.spec
        if isinstance(spec, BM25):
            return "bm25"
        if isinstance(spec, Generative):
            return "nci"
        return "dense"

    def fit(self, seed: int | None = None):
        """The cached fit of a trained row at its chosen learning rate (the study's first seed)."""
        with cache_only():
            return self.study.fit(self.system, seed)


def explorable(system: System) -> bool:
    """BM25, dense encoders (zero-shot or fine-tuned) and NCI models: the rows that rank a query."""
    return isinstance(system.spec, (BM25, Dense, Generative))


def availability(study: Study, system: System) -> str:
    """ "" when everything the system needs is cached (an untrained row always is), else the reason."""
    if not system.spec.trained:
        return ""
    try:
        with cache_only():
            study.fit(system)
    except NotCached as missing:
        return f"not trained yet ({missing.kind} missing): run notebooks/{study.notebook}.ipynb under profile {study.options.profile}"
    return ""


def catalog(profile: str = "smoke", dataset: str | None = None, notebooks: list[str] | None = None) -> list[Entry]:
    """Every explorable system of the source notebooks (the first notebook that names a system wins),
    each with its study under ``profile`` (and ``dataset``, if given) and its availability."""
    entries: dict[str, Entry] = {}
    for notebook in EXPLORED:
        if notebooks is not None and notebook not in notebooks:
            continue
        table = TABLES[notebook]
        overrides = {"dataset": dataset} if dataset else None
        params = parameters_for(_profile_path(profile), NOTEBOOKS / f"{notebook}.ipynb", overrides)
        study = Study(notebook, params, table.family, progress=False)
        for system in table.rows(study):
            if system.name in entries or not explorable(system):
                continue
            entries[system.name] = Entry(system.name, notebook, system, study, availability(study, system))
    return list(entries.values())


def _profile_path(profile: str) -> Path | str:
    path = NOTEBOOKS / "profiles" / f"{profile}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (NOTEBOOKS / "profiles").glob("*.yaml"))
        raise ValueError(f"profile={profile!r}: no notebooks/profiles/{profile}.yaml (known: {known})")
    return path
