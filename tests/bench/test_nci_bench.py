from longdoc.bench.nci import main


def test_nci_benchmark_prints_its_ratios(capsys):
    out = main(
        [
            "--documents",
            "60",
            "--k",
            "4",
            "--hidden",
            "32",
            "--layers",
            "1",
            "--heads",
            "2",
            "--decoder-layers",
            "1",
            "--adaptor-layers",
            "1",
            "--beams",
            "3",
            "--batch",
            "2",
            "--repeats",
            "1",
            "--device",
            "cpu",
        ]
    )
    printed = capsys.readouterr().out
    assert "constrained ÷ unconstrained" in printed and "NCI ÷ FirstP + FAISS" in printed
    assert list(out.index) == [3] and (out.filter(like="÷") > 0).all().all()


def test_pawa_benchmark_prints_both_tables(capsys):
    from longdoc.bench import nci_pawa

    nci_pawa.main(["--hidden", "32", "--steps", "8", "--evaluations", "2", "--documents", "30"])
    out = capsys.readouterr().out
    for variant in ("plain decoder", "PAWA, unscaled", "raw states (dot)", "unit states (cosine)"):
        assert variant in out
    assert "adaptor_change" in out and "consistency" in out and "state_norm" in out
