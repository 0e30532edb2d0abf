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


def metric_bars(table: pd.DataFrame, path: Path, title: str = ""):
    """Grouped bars: systems (rows) by metrics (columns)."""
    ax = table.plot.bar(figsize=(8, 3.8), rot=0, width=0.8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.legend(loc="lower right", ncols=len(table.columns))
    fig = ax.get_figure()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig


def sweep_plot(table: pd.DataFrame, path: Path, xlabel: str, title: str = "", logx: bool = False):
    """Metrics (columns) against a swept parameter (the index), as in Longtriever Figure 3."""
    ax = table.plot(marker="o", figsize=(6, 3.8), logx=logx)
    ax.set_xticks(list(table.index))
    ax.set_xticklabels([str(v) for v in table.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig = ax.get_figure()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig


def growth_curves(measurements: pd.DataFrame, path: Path, title: str = ""):
    """Encode time and peak memory against document length, one line per model."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, column, label in [(axes[0], "time_ms", "time per batch (ms)"), (axes[1], "memory_gib", "peak memory (GiB)")]:
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
