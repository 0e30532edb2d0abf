"""The explorer's front end in JupyterLab (ipywidgets): a query box and a list of test queries, the
systems to compare, their top 10 side by side (relevance marks, lengths, the deciding segment with the
query's terms marked, NCI's identifier prefixes), and the test queries on which two systems disagree.
Every view is an HTML string built by a function here, so tests read exactly what the widgets show."""

from __future__ import annotations

import html
from operator import eq

from longdoc.explore.catalog import Entry, catalog
from longdoc.explore.evidence import deciding_segment, highlight, identifier_path
from longdoc.explore.ranking import Searcher, disagreements, ranking_table


def same_corpus(a, b) -> bool:
    """The same documents in the same order (ids compared one by one: a memory-mapped corpus's are lazy)."""
    return a.checksum == b.checksum and len(a.doc_ids) == len(b.doc_ids) and all(map(eq, a.doc_ids, b.doc_ids))


HEADLINE = ("MaxP", "Longtriever", "SeDR", "NCI")  # each paper's own row (by its paper name), shown first


class Explorer:
    """The systems of :func:`~longdoc.explore.catalog.catalog` under ``profile`` with a searcher each
    (built on first use), and the test queries of their data."""

    def __init__(
        self,
        profile: str = "smoke",
        dataset: str | None = None,
        k: int = 10,
        entries: list[Entry] | None = None,
        notebooks: list[str] | None = None,
    ):
        found = entries if entries is not None else catalog(profile, dataset, notebooks)
        self.entries = {e.name: e for e in found}
        if not self.entries:
            raise ValueError(f"profile={profile!r}: no explorable system")
        self.k = k
        self.searchers: dict[str, Searcher] = {}
        first = next(iter(self.entries.values())).study
        self.corpus = first.data
        self.test_queries, self.test_qrels = first.split("test")
        self.all_qrels = {q: d for judged in first.data.qrels.values() for q, d in judged.items()}
        for entry in self.entries.values():  # side by side only on one corpus (a profile may subsample per notebook)
            if entry.ready and not same_corpus(entry.study.data, self.corpus):
                entry.missing = (
                    f"ranks another corpus ({entry.study.data.name}, {len(entry.study.data.corpus)} documents) than "
                    f"{self.corpus.name} ({len(self.corpus.corpus)}): Explorer(profile, notebooks=['{entry.notebook}'])"
                )

    @property
    def ready(self) -> list[str]:
        return [name for name, e in self.entries.items() if e.ready]

    def default_systems(self, count: int = 5) -> list[str]:
        """BM25 and each paper's own system where it is ready (MaxP, Longtriever, SeDR, NCI), then the
        other trained rows, then the rest."""
        ready = self.ready

        def rank(name: str) -> int:
            entry = self.entries[name]
            if entry.kind == "bm25":
                return 0
            if entry.system.paper_name in HEADLINE:
                return 1
            return 2 if entry.system.spec.trained else 3

        return sorted(ready, key=lambda n: (rank(n), ready.index(n)))[:count]

    @property
    def missing(self) -> dict[str, str]:
        return {name: e.missing for name, e in self.entries.items() if not e.ready}

    def searcher(self, name: str) -> Searcher:
        if name not in self.entries:
            raise ValueError(f"unknown system {name!r} (known: {sorted(self.entries)})")
        entry = self.entries[name]
        if not entry.ready:
            raise ValueError(f"{name}: {entry.missing}")
        return self.searchers.setdefault(name, Searcher(entry))

    def query_text(self, text: str = "", query_id: str = "") -> tuple[str, dict | None]:
        """The text to search and its judgements: a picked test query's, or a typed query matching the
        text of a judged query (else no relevance marks)."""
        if query_id:
            if query_id not in self.test_queries:
                raise ValueError(f"unknown test query id {query_id!r}")
            return self.test_queries[query_id], self.all_qrels.get(query_id)
        text = text.strip()
        judged = next((q for q, t in self.test_queries.items() if t.strip().lower() == text.lower()), None)
        return text, self.all_qrels.get(judged) if judged else None

    def ranking_html(self, names: list[str], text: str = "", query_id: str = "") -> str:
        """Each chosen system's top k side by side, every hit with its reason."""
        query, qrels = self.query_text(text, query_id)
        if not query:
            return "<p>Type a query or pick a test query.</p>"
        if not names:
            return "<p>Choose at least one system.</p>"
        columns = [self._column(name, query, qrels) for name in names]
        marks = "relevance marks from the judgements" if qrels is not None else "no judgements for this query"
        head = f"<p class='longdoc-query-shown'>query: <b>{html.escape(query)}</b> ({marks})</p>"
        return head + "<div style='display:flex;gap:14px;align-items:flex-start'>" + "".join(columns) + "</div>"

    def _column(self, name: str, query: str, qrels: dict | None) -> str:
        searcher = self.searcher(name)
        hits = searcher.search(query, self.k)
        table = ranking_table(searcher.entry, hits, qrels)
        rows = []
        for row in table.itertuples(index=False):  # the first hit's reason open, the others folded
            mark = {"yes": "✔", "no": "✘"}.get(row.relevant, "")
            rows.append(
                f"<tr class='longdoc-hit'><td>{row.rank}</td><td title='{html.escape(row.document)}'>"
                f"{html.escape(str(row.title))[:60]}</td><td>{mark}</td><td>{row.tokens}</td><td>{row.score:.3g}</td></tr>"
                f"<tr><td></td><td colspan='4'>{self._reason(searcher, row.document, query, row.rank == 1)}</td></tr>"
            )
        body = "".join(rows) or "<tr><td colspan='5'>no document</td></tr>"
        return (
            f"<div class='longdoc-system' style='flex:1;min-width:230px'><h4>{html.escape(name)}</h4>"
            "<table><tr><th>#</th><th>document</th><th>rel.</th><th>tokens</th><th>score</th></tr>"
            f"{body}</table></div>"
        )

    def _reason(self, searcher: Searcher, doc_id: str, query: str, unfolded: bool = False) -> str:
        kind = searcher.entry.kind
        details = "<details open>" if unfolded else "<details>"
        if doc_id not in searcher.entry.study.data.corpus:
            return "<i>an identifier no document has</i>"
        if kind == "dense":
            evidence = deciding_segment(searcher, doc_id, query)
            return (
                f"{details}<summary>{html.escape(evidence.note)}</summary>"
                f"<div style='font-size:85%'>{highlight(evidence.text, query)}</div></details>"
            )
        if kind == "nci":
            path = identifier_path(searcher.engine(), doc_id)
            steps = "<br>".join(
                f"{p['prefix']}: {p['documents']} document(s)"
                + (f", e.g. {html.escape(p['examples'])}" if p["examples"] else "")
                for p in path
            )
            return f"{details}<summary>identifier {path[-1]['prefix']}</summary><div style='font-size:85%'>{steps}</div></details>"
        text = searcher.entry.study.data.corpus[doc_id].full_text[:400]
        return f"{details}<summary>BM25: the document's terms</summary><div style='font-size:85%'>{highlight(text, query)}</div></details>"

    def disagreement_html(self, a: str, b: str, top: int = 10) -> str:
        frame = disagreements(self.searcher(a), self.searcher(b), self.test_queries, self.test_qrels, top=top)
        return f"<p>Test queries where {html.escape(a)} and {html.escape(b)} differ most (MRR@100)</p>" + frame.to_html(
            index=False, float_format=lambda v: f"{v:.3g}"
        )

    def missing_html(self) -> str:
        if not self.missing:
            return ""
        items = "".join(f"<li>{html.escape(n)}: {html.escape(why)}</li>" for n, why in self.missing.items())
        return f"<details><summary>{len(self.missing)} system(s) not trained yet</summary><ul>{items}</ul></details>"

    # -- widgets --------------------------------------------------------------------------------
    def widget(self):
        import ipywidgets as widgets

        query = widgets.Text(placeholder="type a query, then Rank", description="query", layout={"width": "60%"})
        query.add_class("longdoc-query")
        pick = widgets.Dropdown(
            options=[("(your own query)", "")] + [(f"{q}: {t}"[:90], q) for q, t in self.test_queries.items()],
            description="test query",
            layout={"width": "60%"},
        )
        pick.add_class("longdoc-pick")
        ready = self.ready
        systems = widgets.SelectMultiple(
            options=ready, value=tuple(self.default_systems()), description="systems", rows=min(10, len(ready))
        )
        systems.add_class("longdoc-systems")
        rank = widgets.Button(description="Rank", button_style="primary")
        rank.add_class("longdoc-rank")
        out = widgets.HTML()
        out.add_class("longdoc-ranking")

        def on_rank(_):
            out.value = "<p>ranking…</p>"
            try:
                out.value = self.ranking_html(list(systems.value), query.value, pick.value)
            except ValueError as err:
                out.value = f"<p style='color:#b00'>{html.escape(str(err))}</p>"

        rank.on_click(on_rank)
        pick.observe(lambda change: setattr(query, "value", "") if change["new"] else None, names="value")

        first = widgets.Dropdown(options=ready, description="system A")
        second = widgets.Dropdown(options=ready, value=ready[1] if len(ready) > 1 else ready[0], description="system B")
        compare = widgets.Button(description="Disagreements")
        compare.add_class("longdoc-compare")
        table = widgets.HTML()
        table.add_class("longdoc-disagreements")

        def on_compare(_):
            try:
                table.value = self.disagreement_html(first.value, second.value)
            except ValueError as err:
                table.value = f"<p style='color:#b00'>{html.escape(str(err))}</p>"

        compare.on_click(on_compare)
        tabs = widgets.Tab(
            children=[
                widgets.VBox([query, pick, systems, rank, widgets.HTML(self.missing_html()), out]),
                widgets.VBox([widgets.HBox([first, second, compare]), table]),
            ]
        )
        tabs.set_title(0, "rank a query")
        tabs.set_title(1, "where two systems disagree")
        return tabs
