"""The outputs nbval compares are stored in the notebooks: checked cells hold their smoke outputs
(with an execution count, or nbval refuses them), every other cell holds none."""

import re
from pathlib import Path

import nbformat
import pytest

from longdoc.experiments.notebook_outputs import CHECK_TAG, checked_cells, keep_checked_outputs

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_only_checked_cells_keep_outputs_with_their_streams_merged():
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("a"), nbformat.v4.new_code_cell("b", metadata={"tags": [CHECK_TAG]})]
    )
    executed = nbformat.from_dict(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a"), nbformat.v4.new_code_cell("b")])
    )
    for number, cell in enumerate(executed.cells, start=1):
        cell.execution_count = number
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="x\n"),
            nbformat.v4.new_output("stream", name="stdout", text="y\n"),
        ]
    keep_checked_outputs(notebook, executed)
    assert notebook.cells[0].outputs == [] and notebook.cells[0].execution_count is None
    assert [o.text for o in notebook.cells[1].outputs] == ["x\ny\n"] and notebook.cells[1].execution_count == 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_notebooks_hold_the_outputs_nbval_compares(path):
    notebook = nbformat.read(path, as_version=4)
    checked = checked_cells(notebook)
    assert checked, f"{path.name}: no cell tagged {CHECK_TAG}"
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if index in checked:
            assert cell.outputs and cell.execution_count, (
                f"{path.name} cell {index}: run python -m longdoc.experiments.notebook_outputs"
            )
            assert not any(o.output_type == "error" for o in cell.outputs), f"{path.name} cell {index} stored an error"
        else:
            assert not cell.outputs, f"{path.name} cell {index}: outputs of an unchecked cell"


def test_the_sanitizer_cuts_numbers_and_blanks_what_differs_between_machines():
    config = (Path(__file__).parents[2] / "notebooks" / "nbval-sanitize.cfg").read_text()
    patterns = re.findall(r"^regex: (.*)$\n^replace: (.*)$", config, flags=re.MULTILINE)

    def sanitize(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    assert sanitize("0.737123 ± 0.0119") == sanitize("0.737999 ± 0.0111") == sanitize("0.73 ± 0.01")
    assert sanitize("0.737") != sanitize("0.747")  # a changed result fails
    assert sanitize("took 12.5 s") == sanitize("took 3 s")
    assert sanitize("/work/main/results/smoke/x") == sanitize("/home/ci/clone/results/smoke/x")
    assert (
        sanitize("200 documents, 36 test")
        == sanitize("200  documents,   36 test")
        != sanitize("200 documents, 37 test")
    )
    assert sanitize("  a  2.413456\n  b  0.441") == sanitize(" a 2.41345\n b 0.44123")  # padding follows raw widths
    rho = "Spearman ρ = {} (rows in a random order reach |ρ| ≥ {} with probability {}). Starts: A {}"
    assert sanitize(rho.format(-0.33, 0.33, 0.83, 0.512)) == sanitize(rho.format(-0.32, 0.32, 0.67, 0.512))
    assert sanitize(rho.format(-0.33, 0.33, 0.83, 0.512)) != sanitize(rho.format(-0.33, 0.33, 0.83, 0.612))
