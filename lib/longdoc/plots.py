"""Matplotlib figures shared by the notebooks (saved under ``figures/<profile>/``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from longdoc.data.registry import REPO_ROOT

FIGURES_DIR = REPO_ROOT / "figures"


def figure_path(profile: str, name: str) -> Path:
    path = FIGURES_DIR / profile / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def length_histogram(lengths: pd.DataFrame, path: Path, limit: int = 512, bins: int = 40):
    """Document length distribution in words and in WordPiece tokens (cf. SeDR Figure 1), with the
    512-token limit of BERT-style encoders marked."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, column in zip(axes, ["words", "tokens"]):
        values = lengths[column].clip(upper=lengths[column].quantile(0.99))
        ax.hist(values, bins=bins, color="#4C72B0", edgecolor="white")
        ax.set_xlabel(f"document length ({'WordPiece tokens' if column == 'tokens' else 'words'}, clipped at p99)")
        ax.set_ylabel("documents")
        if column == "tokens":
            share = (lengths[column] <= limit).mean()
            ax.axvline(limit, color="#C44E52", linestyle="--", label=f"{limit} tokens ({share:.1%} of documents fit)")
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig


INTERVAL_CAPTION = (
    "error bars: 95% interval over queries (bootstrap) or document pairs (dyadic-robust SE) and seeds, as the verdicts'"
)
PAPER_CAPTION = "the papers' numbers (other collections, other scale) are not drawn here: see the claims figure"


def _interval_errors(table: pd.DataFrame, measure: str):
    """Asymmetric error bars from ``m 95% low`` / ``m 95% high`` (zero where a measure has none)."""
    low, high = table[f"{measure} 95% low"].astype(float), table[f"{measure} 95% high"].astype(float)
    means = table[measure].astype(float)
    return [(means - low).fillna(0).clip(lower=0), (high - means).fillna(0).clip(lower=0)]


def _require_intervals(table: pd.DataFrame, measures: list[str], where: str) -> None:
    missing = [m for m in measures if f"{m} 95% low" not in table or f"{m} 95% high" not in table]
    if missing:
        raise ValueError(f"{where}: no 95% interval columns for {missing} (use study.table(..., intervals=True))")


def system_bars(table: pd.DataFrame, path: Path, measures: list[str], title: str = ""):
    """One panel per measure, systems on the y axis (labels never overlap): our mean over seeds with
    its 95% interval over test items and seeds (the resampling the verdicts use) as the error bar.
    ``table`` comes from :meth:`Study.table` with ``intervals=True``. The papers' values stay off this
    axis (another collection, another scale): the claims figure shows them as the papers' differences."""
    _require_intervals(table, measures, "system_bars")
    systems = list(table.index)[::-1]  # first row on top
    fig, axes = plt.subplots(
        1, len(measures), figsize=(3.2 * len(measures) + 2.2, 0.42 * len(systems) + 1.6), sharey=True, squeeze=False
    )
    shown = table.loc[systems]
    y = list(range(len(systems)))
    for ax, measure in zip(axes[0], measures):
        has_interval = shown[f"{measure} 95% low"].notna().any()  # F1: none, and no empty caps either
        ax.barh(
            y,
            shown[measure].astype(float),
            xerr=_interval_errors(shown, measure) if has_interval else None,
            color="#4C72B0",
            alpha=0.85,
            capsize=3,
        )
        ax.set_xlim(0, 1)
        ax.set_title(measure if has_interval else f"{measure} (no per-item interval)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(y)
    axes[0][0].set_yticklabels(systems)
    fig.suptitle(title)
    fig.text(
        0.01,
        0.01,
        f"bars: mean over seeds; {INTERVAL_CAPTION}.\n{PAPER_CAPTION}.",
        fontsize=7.5,
        style="italic",
        va="bottom",
    )
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def sweep_plot(
    table: pd.DataFrame,
    path: Path,
    measures: list[str],
    xlabel: str,
    title: str = "",
    paper_trend: str = "",
    logx: bool = False,
    ylabel: str = "score (test)",
):
    """Measures against a swept parameter (the index), as in Longtriever Figure 3: one panel per
    measure, each on its own axis (MRR@100 and R@100 differ in scale), with 95% intervals as error bars
    (columns ``m 95% low`` / ``m 95% high``, from :meth:`Study.table` with ``intervals=True``), and the
    paper's trend as a caption (its figures give no values on our collection)."""
    _require_intervals(table, measures, "sweep_plot")
    fig, axes = plt.subplots(1, len(measures), figsize=(4.2 * len(measures) + 0.6, 4.0), squeeze=False)
    x = list(table.index)
    for ax, measure in zip(axes[0], measures):
        ax.errorbar(x, table[measure].astype(float), yerr=_interval_errors(table, measure), marker="o", capsize=3)
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xticks(x)
        ax.set_xticklabels([str(v) for v in x])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{measure} ({ylabel})" if ylabel != "score (test)" else f"{measure} (test)")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    caption = f"{INTERVAL_CAPTION}." + (f"\npaper: {paper_trend}" if paper_trend else "")
    fig.text(0.01, 0.01, caption, fontsize=8, style="italic", va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def growth_curves(measurements: pd.DataFrame, path: Path, title: str = ""):
    """Encode time and peak memory against document length, one line per model."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, column, label in [
        (axes[0], "time_ms", "time per batch (ms)"),
        (axes[1], "memory_gib", "peak memory (GiB)"),
    ]:
        if not (measurements[column] > 0).any():  # e.g. CPU memory without process isolation
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            ax.set_ylabel(label)
            continue
        for model, rows in measurements.groupby("model", sort=False):
            rows = rows.sort_values("length")
            ax.plot(rows["length"], rows[column], marker="o", label=model)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("document length (tokens)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig


def bucket_plot(
    scores: pd.DataFrame,
    path: Path,
    measure: str = "MRR@100",
    title: str = "",
    paper_trend: str = "",
    xlabel: str = "length of the relevant document",
):
    """Score per length bucket, one line per system, 95% intervals as error bars (SeDR Figure 4).
    ``scores``: rows of (system, bucket, queries, mean, 95% CI low, 95% CI high)."""
    buckets = list(dict.fromkeys(scores["bucket"]))
    fig, ax = plt.subplots(figsize=(9.6, 4.4))
    for offset, (system, rows) in enumerate(scores.groupby("system", sort=False)):
        rows = rows.set_index("bucket").loc[buckets]
        x = [i + 0.06 * (offset - 2) for i in range(len(buckets))]
        errors = [rows["mean"] - rows["95% CI low"], rows["95% CI high"] - rows["mean"]]
        ax.errorbar(x, rows["mean"], yerr=errors, marker="o", capsize=3, label=system)
    counts = scores.drop_duplicates("bucket").set_index("bucket")["queries"]
    ax.set_xticks(range(len(buckets)))
    ax.set_xticklabels([f"{b}\n({counts[b]} queries)" for b in buckets], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{measure} (test)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # never over a point
    if paper_trend:
        fig.text(0.01, 0.01, f"paper: {paper_trend}", fontsize=8, style="italic")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def tsne_panels(panels: dict, path: Path, title: str = ""):
    """One t-SNE panel per model (SeDR Figure 5): ``panels[name] = (points [1 + V, 2], owners [V],
    labels {owner: name}, relevant owners)``; row 0 of ``points`` is the query (a star), each document's
    segments share a colour, relevant documents are drawn with a black edge."""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.6), squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, (name, (points, owners, labels, relevant)) in zip(axes[0], panels.items()):
        ax.scatter(points[0, 0], points[0, 1], marker="*", s=220, color="black", label="query", zorder=3)
        for i, doc in enumerate(dict.fromkeys(owners.tolist())):
            rows = points[1:][owners == doc]
            ax.scatter(
                rows[:, 0],
                rows[:, 1],
                s=36,
                color=colours(i % 10),
                label=labels[doc],
                edgecolors="black" if doc in relevant else "none",
                linewidths=1.2,
            )
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    handles, names = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncols=min(6, len(names)), fontsize=7, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def learning_curves(
    curves: dict[str, pd.DataFrame], path: Path, measures: list[str], title: str = "", paper_trend: str = ""
):
    """Dev measures against training epochs, one line per model (NCI Figure 3); ``curves[name]`` has an
    ``epoch`` column and one column per measure."""
    fig, axes = plt.subplots(1, len(measures), figsize=(4.6 * len(measures), 3.8), squeeze=False)
    for ax, measure in zip(axes[0], measures):
        for name, curve in curves.items():
            ax.plot(curve["epoch"], curve[measure], marker="o", label=name)
        ax.set_xlabel("epochs over the training examples")
        ax.set_ylabel(f"{measure} (dev)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    if paper_trend:
        fig.text(0.01, 0.01, f"paper: {paper_trend}", fontsize=8, style="italic")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


def semantic_id_panels(
    groups: dict[str, dict[str, pd.DataFrame]],
    points,
    clusters,
    marked: dict[str, list[int]],
    path: Path,
    title: str = "",
):
    """NCI Figure 4: per query group, the probabilities of each query's retrieved documents by their
    identifier prefix; and the t-SNE of the document embeddings coloured by top-level cluster, with the
    groups' retrieved documents marked."""
    fig, axes = plt.subplots(1, len(groups) + 1, figsize=(5.2 * (len(groups) + 1), 4.2), squeeze=False)
    for ax, (group, queries) in zip(axes[0], groups.items()):
        prefixes = sorted({p for frame in queries.values() for p in frame["prefix"]})
        width = 0.8 / max(len(queries), 1)
        for i, (query, frame) in enumerate(queries.items()):
            best = frame.groupby("prefix")["probability"].sum()
            ax.bar(
                [j + i * width for j in range(len(prefixes))],
                [best.get(p, 0.0) for p in prefixes],
                width,
                label=query[:40],
            )
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(prefixes))])
        ax.set_xticklabels(prefixes, rotation=90, fontsize=7)
        ax.set_title(f"query group {group}")
        ax.set_ylabel("probability of the retrieved documents")
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    ax.scatter(points[:, 0], points[:, 1], c=clusters, cmap="tab20", s=6, alpha=0.6)
    for (group, rows), marker in zip(marked.items(), ["*", "^", "s", "P"]):
        ax.scatter(
            points[rows, 0], points[rows, 1], marker=marker, s=90, color="black", label=f"retrieved for group {group}"
        )
    ax.set_title("t-SNE of document embeddings (colour: first identifier digit)", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig


def ladder_plot(frame: pd.DataFrame, path: Path, title: str = ""):
    """Each headline difference with its 95% interval against the training examples of its rung, one
    panel per paper (budget ladder, notebook 90). Filled markers: a verdict (two seeds, every
    precondition met); hollow: a trend only. ``frame``: rows of (paper, system, against, measure,
    training examples, verdict, Δ, 95% CI low, 95% CI high)."""
    papers = list(dict.fromkeys(frame["paper"]))
    columns = min(2, len(papers))
    rows_ = (len(papers) + columns - 1) // columns
    fig, axes = plt.subplots(rows_, columns, figsize=(6.2 * columns, 3.8 * rows_), squeeze=False)
    for ax, paper in zip(axes.flat, papers):
        shown = frame[frame["paper"] == paper]
        for offset, ((system, against, measure), rows) in enumerate(
            shown.groupby(["system", "against", "measure"], sort=False)
        ):
            rows = rows.sort_values("training examples")
            x = rows["training examples"] * (1.08**offset)  # side by side on the log axis
            errors = [rows["Δ"] - rows["95% CI low"], rows["95% CI high"] - rows["Δ"]]
            line = ax.errorbar(
                x, rows["Δ"], yerr=errors, capsize=3, label=f"{system} − {against} ({measure})", linewidth=1
            )
            color = line[0].get_color()
            for xi, (_, row) in zip(x, rows.iterrows()):
                face = color if row["verdict"] != "not testable at this scale" else "white"
                ax.plot(xi, row["Δ"], "o", color=color, markerfacecolor=face)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ticks = sorted(shown["training examples"].unique())
        ax.set_xlim(ticks[0] / 1.5, ticks[-1] * 1.5 * 1.08 ** (shown.groupby(["system", "against"]).ngroups - 1))
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:,}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("training examples per run (the rung's fine-tuning budget)")
        ax.set_ylabel("Δ on test, 95% interval")
        ax.set_title(paper)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(papers) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.text(
        0.01,
        0.005,
        "filled: a verdict (two seeds, every precondition met); hollow: a trend only (one seed, or a precondition "
        "unmet); above 0: the paper's direction",
        fontsize=8,
        style="italic",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    return fig


VERDICT_COLOURS = {
    "holds": "#55A868",
    "reversed": "#C44E52",
    "not shown at this scale": "#4C72B0",
    "underpowered here": "#DD8452",
    "not testable at this scale": "#999999",
}


def claim_forest(frame: pd.DataFrame, path: Path, title: str = "", close: bool = True):
    """A paper's claim card as a forest plot: our difference with its 95% interval per claim (coloured by
    verdict; hollow where not testable), the zero line, and the paper's own difference as a black
    diamond on the same Δ axis. ``frame``: rows of (claim, Δ, low, high, paper Δ, verdict). Returns the
    path, or the figure with ``close=False`` (a notebook shows it inline)."""
    height = 0.55 * max(len(frame), 1) + 1.7
    fig, ax = plt.subplots(figsize=(9.5, height))
    labels = [c if len(c) <= 60 else c[:57] + "…" for c in frame["claim"]]
    for y, (_, row) in enumerate(frame.iterrows()):
        colour = VERDICT_COLOURS.get(row["verdict"], "#999999")
        face = "white" if row["verdict"] == "not testable at this scale" else colour
        delta, errors = row["Δ"], [[row["Δ"] - row["low"]], [row["high"] - row["Δ"]]]
        ax.errorbar(delta, y, xerr=errors, fmt="none", ecolor=colour, capsize=3)
        ax.plot(delta, y, "o", color=colour, markerfacecolor=face)
        if pd.notna(row["paper Δ"]):
            ax.plot(row["paper Δ"], y + 0.2, "D", color="black", markersize=5)  # just below ours
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(frame)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("Δ (the claim's measure on test; right of 0: the paper's direction)")
    handles = [
        plt.Line2D(
            [], [], marker="o", linestyle="", color=c, label=v, markerfacecolor="white" if "testable" in v else c
        )
        for v, c in VERDICT_COLOURS.items()
    ] + [plt.Line2D([], [], marker="D", linestyle="", color="black", label="the paper's Δ")]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=5)  # below the axis label, at any height
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout(rect=(0, 0.4 / height, 1, 1))  # the bottom 0.4 inch is the legend's
    fig.savefig(path, dpi=120, bbox_inches="tight")
    if not close:
        return fig
    plt.close(fig)
    return path
