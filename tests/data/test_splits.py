"""Collections with only a test split: the message that names what is missing, and the seeded carve
(``python -m longdoc.data.convert split``) that makes train and dev from the test queries."""

import json
import shutil

import pytest
from tests.conftest import write_tiny_dataset

from longdoc.data.beir import load_beir
from longdoc.data.convert import main
from longdoc.data.splits import carve_splits, require_splits


def only_test_judgements(tmp_path):
    """The tiny dataset with all 24 of its judged queries in qrels/test.tsv, as BEIR ships most collections."""
    directory = write_tiny_dataset(tmp_path / "tiny")
    lines = [(directory / "qrels" / f"{split}.tsv").read_text().splitlines() for split in ("train", "dev", "test")]
    for split in ("train", "dev"):
        (directory / "qrels" / f"{split}.tsv").unlink()
    (directory / "qrels" / "test.tsv").write_text(
        "\n".join([lines[0][0]] + [row for rows in lines for row in rows[1:]]) + "\n"
    )
    return directory


def test_a_missing_split_is_named_with_its_use_and_the_carve_command(tmp_path):
    with pytest.raises(ValueError) as err:
        require_splits("data/scifact", {"test": {}})
    message = str(err.value)
    assert "qrels/train.tsv (fine-tuning)" in message and "qrels/dev.tsv (model selection" in message
    assert "python -m longdoc.data.convert split --dir data/scifact --from test" in message
    require_splits("data/x", {"train": {}, "dev": {}, "test": {}})  # nothing missing: no error


def test_a_study_on_a_test_only_collection_fails_before_training(tmp_path, tiny_study, isolated_outputs):
    directory = only_test_judgements(tmp_path)
    study = tiny_study(directory, "unused-backbone")
    with pytest.raises(ValueError, match=r"missing qrels/train.tsv \(fine-tuning\); qrels/dev.tsv"):
        study.data  # noqa: B018 (reading the data checks it)


def test_the_carve_is_seeded_complete_and_disjoint():
    qrels = {"test": {f"q{i}": {f"d{i}": 1} for i in range(200)}}
    carved = carve_splits(qrels, "test", train=60, dev=20, seed=0)
    assert carved == carve_splits(qrels, "test", train=60, dev=20, seed=0)  # same seed, same deal
    assert carved != carve_splits(qrels, "test", train=60, dev=20, seed=1)
    ids = [set(carved[s]) for s in ("train", "dev", "test")]
    assert set().union(*ids) == set(qrels["test"]) and sum(map(len, ids)) == 200  # every query once
    assert 90 < len(ids[0]) < 150 and 20 < len(ids[1]) < 60  # about 60 / 20 / 20
    assert all(carved[s][q] == qrels["test"][q] for s in carved for q in carved[s])  # judgements kept whole


def test_the_carve_refuses_what_it_cannot_do():
    qrels = {"test": {"q1": {"d1": 1}, "q2": {"d2": 1}}}
    with pytest.raises(ValueError, match="--from dev: no such split"):
        carve_splits(qrels, "dev")
    with pytest.raises(ValueError, match="together < 100"):
        carve_splits(qrels, "test", train=80, dev=20)
    with pytest.raises(ValueError, match="left .* empty: too few queries"):
        carve_splits(qrels, "test")
    with pytest.raises(ValueError, match=r"already has \['train'\]"):
        carve_splits({**qrels, "train": {}}, "test")


def test_convert_split_writes_a_dataset_the_study_accepts(tmp_path, capsys):
    source = only_test_judgements(tmp_path)
    before = load_beir(source).checksum
    out = tmp_path / "tiny-split"
    assert main(["split", "--dir", str(source), "--train", "50", "--dev", "25", "--seed", "3", "--out", str(out)]) == 0
    assert "run notebooks on it" in capsys.readouterr().out
    carved = load_beir(out)
    assert sorted(carved.qrels) == ["dev", "test", "train"] and carved.corpus.keys() == load_beir(source).corpus.keys()
    assert load_beir(source).checksum == before  # the source folder is left as it was
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["carved"] == {
        "from": "test",
        "train": 50,
        "dev": 25,
        "seed": 3,
        "source": str(source),
        "source_checksum": before,
    }
    require_splits(str(out), carved.qrels)
    assert main(["split", "--dir", str(source), "--out", str(out)]) == 2  # never over an existing folder
    assert "exists and is not empty" in capsys.readouterr().err
    shutil.rmtree(out)
    assert main(["split", "--dir", str(source), "--train", "90", "--dev", "20", "--out", str(out)]) == 2
    assert "--train 90 --dev 20" in capsys.readouterr().err and not out.exists()


def test_a_dev_hold_out_is_a_seeded_disjoint_share_of_train():
    from longdoc.data.splits import hold_out_dev, in_share

    train = {f"q{i}": {f"d{i}": 1} for i in range(2000)}
    held = hold_out_dev({"train": train, "test": {"t": {"d": 1}}}, 0.1, seed=0)
    assert set(held["train"]) | set(held["dev"]) == set(train) and not set(held["train"]) & set(held["dev"])
    assert 150 < len(held["dev"]) < 250 and held["test"] == {"t": {"d": 1}}
    assert hold_out_dev({"train": train}, 0.1, seed=0)["dev"] == held["dev"]  # the same seed, the same split
    assert set(hold_out_dev({"train": train}, 0.1, seed=1)["dev"]) != set(held["dev"])
    assert in_share("q7", 1.0) and not in_share("q7", 0.0)


def test_a_dev_hold_out_refuses_what_it_cannot_do():
    from longdoc.data.splits import hold_out_dev

    with pytest.raises(ValueError, match="already has a 'dev' split"):
        hold_out_dev({"train": {"q": {"d": 1}}, "dev": {}}, 0.1, seed=0)
    with pytest.raises(ValueError, match="needs a 'train' split"):
        hold_out_dev({"test": {"q": {"d": 1}}}, 0.1, seed=0)
    with pytest.raises(ValueError, match=r"must be in \(0, 1\)"):
        hold_out_dev({"train": {"q": {"d": 1}}}, 1.5, seed=0)
    with pytest.raises(ValueError, match="left dev empty"):
        hold_out_dev({"train": {"q": {"d": 1}}}, 0.0001, seed=0)


def test_the_msmarco_converter_holds_dev_out_of_train_and_keeps_ms_marco_dev_reportable(fixtures, tmp_path):
    from longdoc.data.beir import load_beir
    from longdoc.data.convert import main

    d = fixtures / "msmarco"
    train = f"train={d / 'msmarco-doctrain-queries.tsv.gz'},{d / 'msmarco-doctrain-qrels.tsv.gz'}"
    reported = f"msmarco-dev={d / 'msmarco-test2019-queries.tsv.gz'},{d / '2019qrels-docs.txt'}"
    out = tmp_path / "msmarco"
    args = ["msmarco", "--docs", str(d / "msmarco-docs.tsv.gz"), "--split", train, "--split", reported]
    assert main(args + ["--dev-from-train", "0.5", "--seed", "5", "--skip-unknown-docs", "--out", str(out)]) == 0
    dataset = load_beir(out)
    assert set(dataset.qrels) == {"train", "dev", "msmarco-dev"}
    assert sorted(set(dataset.qrels["train"]) | set(dataset.qrels["dev"])) == ["174249", "320792"]
    assert dataset.manifest["dev_held_out_of_train"] == {"fraction": 0.5, "seed": 5}
    clash = ["--split", f"dev={d / 'msmarco-test2019-queries.tsv.gz'},{d / '2019qrels-docs.txt'}"]
    assert main(args + clash + ["--dev-from-train", "0.5", "--out", str(tmp_path / "x")]) == 2
