"""The checks run_all.sh makes before the first notebook: each finds what it must and passes what is fine."""

import shutil
from pathlib import Path

import yaml

from longdoc.experiments.preflight import cache_problem, dataset_problems, pretrain_corpus_problem, problems

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def parameters(folder: Path, notebook: str, **values) -> Path:
    path = folder / f"{notebook}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def test_a_complete_dataset_passes_and_each_missing_split_is_named(tmp_path):
    data = tmp_path / "mine"
    shutil.copytree(FIXTURES / "beir", data)
    (data / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\n")
    assert dataset_problems(str(data), "retrieval", "01_baselines") == []
    (data / "qrels" / "train.tsv").unlink()
    assert dataset_problems(str(data), "retrieval", "01_baselines") == [
        f"{data}: no qrels/train.tsv (the notebook needs ['train', 'dev', 'test'])"
    ]
    assert dataset_problems(str(data), "retrieval", "00_data") == []  # 00 describes the splits there are
    assert dataset_problems("manpages", "retrieval", "01_baselines") == []


def test_a_matching_split_without_pairs_is_named(tmp_path):
    data = tmp_path / "match"
    shutil.copytree(FIXTURES / "beir", data)
    (data / "pairs").mkdir()
    rows = {"train": "d1\td2\t1\n", "dev": "", "test": "d1\td3\t1\nd2\td3\t0\n"}
    for split, row in rows.items():
        (data / "pairs" / f"{split}.tsv").write_text("source-id\ttarget-id\tlabel\n" + row)
    assert dataset_problems(str(data), "matching", "30_smith_main") == [
        f"{data / 'pairs' / 'dev.tsv'}: split 'dev' holds no pair"
    ]
    (data / "pairs" / "dev.tsv").write_text("d1\td4\t0\n")
    assert dataset_problems(str(data), "matching", "30_smith_main") == [
        f"{data / 'pairs' / 'dev.tsv'}: split 'dev' holds only pairs labelled 0 (it is scored on both)"
    ]
    (data / "pairs" / "dev.tsv").write_text("d2\td1\t0\n")  # the train pair again, reversed
    assert (
        "pair ('d2', 'd1') of split 'dev' is in split 'train' too" in dataset_problems(str(data), "matching", "30")[0]
    )


def test_the_cache_must_be_a_writable_folder_or_creatable_in_one(tmp_path):
    assert cache_problem(tmp_path / "new" / "cache") is None
    (tmp_path / "file").write_text("x")
    assert (
        cache_problem(tmp_path / "file")
        == f"the cache folder {tmp_path / 'file'} (LONGDOC_CACHE): {tmp_path / 'file'} is a file, not a folder"
    )
    assert "is a file, not a folder" in cache_problem(tmp_path / "file" / "below")


def test_pretrain_corpora(tmp_path):
    assert pretrain_corpus_problem("") is None and pretrain_corpus_problem("unjudged") is None
    (tmp_path / "books.txt").write_text("one\n\ntwo\n")
    assert pretrain_corpus_problem(str(tmp_path / "books.txt")) is None
    assert "no such folder" in pretrain_corpus_problem(str(tmp_path / "nowhere"))
    shutil.copytree(FIXTURES / "beir", tmp_path / "beir")
    assert pretrain_corpus_problem(str(tmp_path / "beir")) is None


def test_the_ladder_checks_every_role_dataset_and_the_list_is_deduplicated(tmp_path):
    cache = tmp_path / "cache"
    files = [
        parameters(tmp_path, "90_budget_ladder", datasets={"retrieval": "/nonexistent/r", "nci": "manpages"}),
        parameters(tmp_path, "01_baselines", dataset="/nonexistent/r"),
        parameters(tmp_path, "10_longtriever_main", dataset="manpages", pretrain_corpus=""),
    ]
    assert problems(files, cache) == [
        "90_budget_ladder: /nonexistent/r: no such folder",
        "01_baselines: /nonexistent/r: no such folder",
    ]


def test_a_backbone_built_here_needs_the_installed_pages_not_weights(monkeypatch):
    from longdoc.data import installed_pages
    from longdoc.experiments.preflight import model_problem

    monkeypatch.setattr(installed_pages, "installed_pages_problem", lambda *a: None)
    assert model_problem("backbone", "manpages-mlm") is None  # built by the first notebook that reads it
    monkeypatch.setattr(installed_pages, "installed_pages_problem", lambda *a: "only 3 man pages outside ...")
    problem = model_problem("backbone", "manpages-mlm")
    assert (
        problem
        == "backbone='manpages-mlm': it is trained here on the installed man pages, and only 3 man pages outside ..."
    )
    assert "resolves to nothing" in model_problem("backbone", "manpages-mlm-typo")


def test_the_installed_pages_problem_names_a_missing_man_and_too_few_pages(monkeypatch, tmp_path):
    from longdoc.data import installed_pages

    monkeypatch.setattr(installed_pages.shutil, "which", lambda name: None)
    assert "man command is missing" in installed_pages.installed_pages_problem(tmp_path)
    monkeypatch.setattr(installed_pages.shutil, "which", lambda name: "/usr/bin/man")
    (tmp_path / "man1").mkdir()
    (tmp_path / "man1" / "ls.1").write_text(".TH LS 1\n")
    assert "only 1 man pages" in installed_pages.installed_pages_problem(tmp_path)


def test_outside_prints_the_numbers_a_profile_leaves_out_of_its_study(capsys, tmp_path):
    from longdoc.experiments import preflight
    from longdoc.experiments.profiles import PROFILES_DIR, outside_the_study

    assert preflight.main(["--outside", str(PROFILES_DIR / "cpu.yaml")]) == 0
    assert capsys.readouterr().out.strip() == ",".join(n[:2] for n in outside_the_study(PROFILES_DIR / "cpu.yaml"))
    assert preflight.main(["--outside", str(PROFILES_DIR / "smoke.yaml")]) == 0
    assert capsys.readouterr().out.strip() == ""
    broken = tmp_path / "notebooks" / "profiles" / "broken.yaml"
    broken.parent.mkdir(parents=True)
    broken.write_text("profile: broken\noutside_the_study: 41_nci_ablation\n")
    assert preflight.main(["--outside", str(broken)]) == 2
    assert "outside_the_study: expected a list" in capsys.readouterr().err


def test_a_gpu_profile_where_torch_sees_no_gpu_stops_unless_allowed():
    from longdoc.experiments.preflight import device_problem

    stop = device_problem("gpu", 1, 0, False, "2.13.0+cpu")
    assert "sized for GPUs (accelerator: gpu) and torch 2.13.0+cpu sees none" in stop and "--allow-cpu" in stop
    assert device_problem("gpu", 1, 0, True, "2.13.0+cpu") is None
    assert device_problem("cpu", 1, 0, False, "2.13.0+cpu") is None  # the cpu and smoke profiles
    assert device_problem("gpu", 8, 8, False, "2.11") is None
    assert device_problem("gpu", 8, 2, False, "2.11") == (
        "n_devices=8 puts 8 processes on each node, more than the GPUs torch sees (2): --set n_devices=2, "
        "or run where 8 are visible"
    )
    assert device_problem("gpu", 16, 8, False, "2.11", nodes=2) is None  # 8 on each of two nodes
    assert "(32 over 2 nodes)" in device_problem("gpu", 32, 8, False, "2.11", nodes=2)


def test_the_node_count_and_its_launcher_are_checked_before_any_work():
    from longdoc.launch import launch_problem

    assert launch_problem(8, {}) == (1, None)
    assert (
        launch_problem(16, {"LONGDOC_NODES": "two"})[1]
        == "LONGDOC_NODES=two: expected a whole number of nodes, 1 or more"
    )
    assert "not the same count on each node" in launch_problem(6, {"LONGDOC_NODES": "4"})[1]
    assert (
        "expected srun (a Slurm allocation) or local"
        in launch_problem(4, {"LONGDOC_NODES": "2", "LONGDOC_LAUNCHER": "ssh"})[1]
    )
    outside = launch_problem(16, {"LONGDOC_NODES": "2"})  # srun, but no Slurm allocation here
    assert outside == (2, "LONGDOC_NODES=2 launches with srun: run inside a Slurm allocation (sbatch or salloc)")
    assert launch_problem(2, {"LONGDOC_NODES": "2", "LONGDOC_LAUNCHER": "local"}) == (2, None)


def test_the_paper_and_gpu_profiles_are_sized_for_gpus_and_the_others_not():
    from longdoc.experiments.profiles import ACCELERATOR, PROFILES_DIR, load_profile

    sized = {path.stem: load_profile(path)[ACCELERATOR] for path in PROFILES_DIR.glob("*.yaml")}
    assert sized == {"paper": "gpu", "gpu": "gpu", "cpu": "cpu", "smoke": "cpu"}


def test_run_all_stops_a_gpu_profile_on_this_machine_before_any_work(monkeypatch, tmp_path, capsys):
    """The preflight of run_all.sh: one line, exit 2, when torch sees no GPU (here, forced to see none)."""
    import longdoc.experiments.preflight as preflight
    from longdoc.experiments.profiles import PROFILES_DIR

    monkeypatch.setattr(preflight, "_gpus_seen", lambda: (0, "2.13.0+cpu"))
    values = parameters(tmp_path, "00_data", dataset="manpages", n_devices=1)
    command = ["--cache", str(tmp_path / "cache"), "--profile-file", str(PROFILES_DIR / "gpu.yaml"), str(values)]
    assert preflight.main(command) == 2
    assert "run_all.sh: this profile is sized for GPUs" in capsys.readouterr().err
    assert preflight.main([*command, "--allow-cpu"]) == 0
    assert (
        preflight.main(
            ["--cache", str(tmp_path / "cache"), "--profile-file", str(PROFILES_DIR / "cpu.yaml"), str(values)]
        )
        == 0
    )
