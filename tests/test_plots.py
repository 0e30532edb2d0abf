"""The shared figures: error bars are the 95% intervals the verdicts use, the papers' values stay off our
axes, each measure of a sweep has its own axis, legends never cover a point, and a notebook's claims
figure draws its findings."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from longdoc import plots  # noqa: E402
from longdoc.analysis.claim_cards import findings_frame, paper_delta  # noqa: E402


def interval_table(index, means, halves, measures=("MRR@100", "R@10"), shifts=(0.0, 0.0)):
    frame = pd.DataFrame(index=index)
    for measure, shift in zip(measures, shifts):
        means = np.array(means) + shift
        frame[measure] = means
        frame[f"{measure} sd"] = 0.5  # far wider than the intervals: a bar drawn from sd would show
        frame[f"{measure} 95% low"] = np.array(means) - np.array(halves)
        frame[f"{measure} 95% high"] = np.array(means) + 2 * np.array(halves)  # asymmetric on purpose
    frame["seeds"] = 2
    return frame


def error_extents(ax, horizontal: bool):
    """(low, high) of each error bar drawn on ``ax``."""
    (container,) = [c for c in ax.containers if hasattr(c, "lines") and c.lines[2]]
    segments = container.lines[2][0].get_segments()
    axis = 0 if horizontal else 1
    return [(min(s[0][axis], s[1][axis]), max(s[0][axis], s[1][axis])) for s in segments]


def test_system_bars_draw_the_95_percent_intervals_and_no_paper_values(tmp_path):
    table = interval_table(["BM25", "FirstP", "SeDR"], [0.5, 0.4, 0.3], [0.01, 0.02, 0.03])
    fig = plots.system_bars(table, tmp_path / "bars.png", ["MRR@100", "R@10"], title="t")
    ax = fig.axes[0]
    drawn = error_extents(ax, horizontal=True)[::-1]  # the first row is drawn on top
    assert np.ravel(drawn) == pytest.approx(np.ravel(list(zip(table["MRR@100 95% low"], table["MRR@100 95% high"]))))
    assert not [c for c in ax.collections if c.get_offsets().size and c.__class__.__name__ == "PathCollection"]
    assert "95% interval over queries (bootstrap) or document pairs" in " ".join(t.get_text() for t in fig.texts)
    with pytest.raises(ValueError, match=r"no 95% interval columns for \['R@10'\].*intervals=True"):
        plots.system_bars(table.drop(columns=["R@10 95% low"]), tmp_path / "x.png", ["MRR@100", "R@10"])


def test_a_sweep_gives_each_measure_its_own_axis_with_intervals(tmp_path):
    table = interval_table([1, 2, 4], [0.2, 0.3, 0.35], [0.01, 0.01, 0.02], ("MRR@100", "R@100"), (0.0, 0.6))
    fig = plots.sweep_plot(table, tmp_path / "sweep.png", ["MRR@100", "R@100"], xlabel="M", paper_trend="rises")
    assert len(fig.axes) == 2 and fig.axes[0].get_ylabel().startswith("MRR@100")
    assert fig.axes[0].get_ylim()[1] < 0.6 < fig.axes[1].get_ylim()[0]  # MRR is not squashed under R@100
    drawn = np.ravel(error_extents(fig.axes[1], horizontal=False))
    assert drawn == pytest.approx(np.ravel(list(zip(table["R@100 95% low"], table["R@100 95% high"]))))
    assert "paper: rises" in " ".join(t.get_text() for t in fig.texts)


def test_the_bucket_legend_stands_outside_the_axes(tmp_path):
    rows = [
        {"system": s, "bucket": b, "queries": 12, "mean": m, "95% CI low": m - 0.1, "95% CI high": m + 0.1}
        for s, shift in [("SeDR", 0.0), ("MaxP", 0.05), ("Longtriever", 0.1)]
        for b, m in [("1", 0.2 + shift), ("2", 0.5 + shift), ("≥ 3", 0.9 + shift)]
    ]
    fig = plots.bucket_plot(pd.DataFrame(rows), tmp_path / "b.png")
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # nothing drawn in the axes is hidden by it


def test_the_papers_difference_is_read_from_a_claims_numbers():
    assert paper_delta("Table 2: 0.329 vs 0.306") == pytest.approx(0.023)
    assert paper_delta("Table 3, NQ320k MRR@100: 73.12 vs 70.56") == pytest.approx(0.0256)  # percent
    # two collections: the largest difference, the one the verdict reads (issue 49's review: a card showed
    # Wiki65K's while its verdict read AAN104K's)
    assert paper_delta("Wiki65K: 0.9585 vs 0.9492; AAN104K: 0.8536 vs 0.8400") == pytest.approx(0.0136)
    assert np.isnan(paper_delta("Figure 4: rising with length (no values given)"))
    assert paper_delta("0.394 vs STAR 0.390") == pytest.approx(0.004)  # a label between
    assert paper_delta("0.434 (Table 1: MS MARCO) vs 0.329") == pytest.approx(0.105)  # "Table 1" is no value
    assert paper_delta("M3 = 2: 72.83 vs M3 = 0: 70.56") == pytest.approx(0.0227)
    assert paper_delta("Table 6: 0.9589 / 0.9594 vs 0.9537 (Wiki65K dev)") == pytest.approx(0.0057)


def test_a_notebooks_claims_figure_draws_each_claim_with_an_interval(tmp_path):
    findings = pd.DataFrame(
        [
            {
                "claim": "A beats B",
                "paper": "0.4 vs 0.3",
                "ours: Δ [95% CI]": "+0.05 [+0.01, +0.09]",
                "verdict": "holds",
            },
            {"claim": "a trend", "paper": "Figure 3", "ours: Δ [95% CI]": "—", "verdict": "not testable at this scale"},
        ]
    )
    frame = findings_frame(findings)
    assert list(frame["claim"]) == ["A beats B"] and frame.iloc[0]["paper Δ"] == pytest.approx(0.1)
    assert (frame.iloc[0]["low"], frame.iloc[0]["high"]) == (0.01, 0.09)
    fig = plots.claim_forest(frame, tmp_path / "claims.png", "t", close=False)
    assert (tmp_path / "claims.png").stat().st_size > 1000 and fig.axes[0].get_yticklabels()[
        0
    ].get_text() == "A beats B"


@pytest.mark.parametrize("claims", [1, 2, 12])
def test_the_claims_legend_covers_neither_the_axis_label_nor_the_axes(tmp_path, claims):
    frame = pd.DataFrame(
        [(f"claim {i}", 0.01 * i, 0.01 * i - 0.03, 0.01 * i + 0.03, 0.03, "holds") for i in range(claims)],
        columns=["claim", "Δ", "low", "high", "paper Δ", "verdict"],
    )
    fig = plots.claim_forest(frame, tmp_path / "c.png", "t", close=False)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = (fig.legends or [ax.get_legend()])[0].get_window_extent(renderer)
    assert legend.y1 <= ax.xaxis.label.get_window_extent(renderer).y0
    assert legend.y1 <= ax.get_tightbbox(renderer).y0 + 1  # below everything the axes draw


def test_a_measure_without_per_item_values_gets_no_error_bar(tmp_path):
    table = interval_table(["normal", "attention"], [0.8, 0.7], [0.02, 0.03], ("Accuracy", "F1"))
    table["F1 95% low"] = table["F1 95% high"] = float("nan")
    fig = plots.system_bars(table, tmp_path / "f1.png", ["Accuracy", "F1"])
    assert fig.axes[1].get_title() == "F1 (no per-item interval)"
    assert not [c for c in fig.axes[1].containers if hasattr(c, "lines")] or all(
        not c.lines[2] for c in fig.axes[1].containers if hasattr(c, "lines")
    )
