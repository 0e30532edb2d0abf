"""Backbones the project builds itself, selected by name like any other (``backbone: manpages-mlm``).

``manpages-mlm`` is the MLM-only BERT of :mod:`longdoc.train.mlm_backbone` (6 layers like the packaged
MiniLM, so every depth setting of the profiles reads it; hidden 256, 4 heads), trained from random weights on this machine's installed man pages outside the benchmark. ``manpages-mlm-base`` is the
same command at BERT-base's shape for GPU nodes. A notebook whose backbone is one of them builds it on
first use (:meth:`longdoc.experiments.study.Study.settings` puts its cache folder where the name was); the
command builds it ahead::

    python -m longdoc.experiments.backbones manpages-mlm           # build (or find) it, print its record
    python -m longdoc.experiments.backbones manpages-mlm --measure  # tokens/s in fp32 and bf16, nothing built

It is cached under ``backbone/<key>``: the recipe, the listing of installed pages, the benchmark's
checksum, the tokenizer's package and the code of the modules that build it (not the whole package's: a
later change elsewhere keeps it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from longdoc.train.mlm_backbone import RECORD, MlmBackboneConfig

# the cpu recipe, chosen by measurement on this study's 2-core Intel Xeon (AMX; 32 x 128 tokens a step,
# python -m longdoc.experiments.backbones manpages-mlm --measure): 6 x 384 (MiniLM's shape) trained at
# 1,600-1,800 tokens/s in fp32 and 2,100-2,700 in bf16, 6 x 256 at 2,300 and 3,300-4,700. Six layers keep
# every depth setting of the profiles (SMITH's sentence_layers up to 6); width 256 buys 1.6x the tokens:
# a first build of 3,200 steps (on the pages before curation) took 58 minutes here. At 150 steps the
# held-out loss was the same at lr 1e-3 and 5e-4 (6.25 and 6.26). 2,700 steps keep the first build, with
# the pages' rendering (10 minutes on 2 cores, once per machine), within the hour.
BUILT_BACKBONES = {
    "manpages-mlm": MlmBackboneConfig(
        layers=6, hidden=256, heads=4, intermediate=1024, steps=2700, batch_size=32, precision="bf16"
    ),
    "manpages-mlm-base": MlmBackboneConfig(  # GPU nodes: BERT-base's shape; the curated pages hold about
        # 6 M tokens, so 5,000 steps of 64 x 512 read them about 27 times (BERT read its 3.3 B words 40 times)
        layers=12,
        hidden=768,
        heads=12,
        intermediate=3072,
        sequence_length=512,
        steps=5000,
        batch_size=64,
        learning_rate=4e-4,
        eval_every=500,
        precision="bf16",
    ),
}
TOKENIZER = "minilm"  # BERT's WordPiece vocabulary (bert-base-uncased), from the packaged backbone
EXCLUDED_BENCHMARK = "manpages"  # no document of it is read, judged or not
BUILDER_MODULES = (  # the code that makes a built backbone (its key's fingerprint)
    "train/mlm_backbone.py",
    "text/masking.py",
    "losses/masked_tokens.py",
    "train/optim.py",
    "seeding.py",
    "data/installed_pages.py",
    "data/page_curation.py",
    "data/manpages.py",
    "data/beir.py",
    "data/jsonl.py",
    "experiments/backbones.py",
)


def is_built(name: str) -> bool:
    return str(name) in BUILT_BACKBONES


def build_problem(name: str) -> str | None:
    """Why backbone ``name`` could not be built here, or None (the check before any notebook starts)."""
    from longdoc.data.installed_pages import installed_pages_problem

    problem = installed_pages_problem()
    return f"it is trained here on the installed man pages, and {problem}" if problem else None


def benchmark_documents() -> tuple[set[str], list[str], str]:
    """The excluded benchmark's document ids, bodies (its text without the title) and checksum."""
    from longdoc.data.registry import load_dataset

    dataset = load_dataset(EXCLUDED_BENCHMARK)
    ids = set(dataset.corpus)
    return ids, [document.text for document in dataset.corpus.values()], dataset.checksum


_FOUND: dict[tuple, Path] = {}  # (name, cache folder, benchmark) -> its folder, once found in this process


def built_backbone(name: str, progress: bool = True) -> Path:
    """The folder of built backbone ``name`` (trained on first use: up to an hour on 2 cores; found once
    per process, as listing the pages and loading the benchmark take seconds)."""
    if not is_built(name):
        raise ValueError(f"backbone={name!r} is not built by the project ({sorted(BUILT_BACKBONES)})")
    from longdoc.experiments.cache import CACHE_DIR

    memo = (name, str(CACHE_DIR), EXCLUDED_BENCHMARK, BUILT_BACKBONES[name])
    if memo not in _FOUND or not _FOUND[memo].is_dir():
        _FOUND[memo] = _find_or_build(name, progress)
    return _FOUND[memo]


def _find_or_build(name: str, progress: bool) -> Path:
    from longdoc.data.installed_pages import installed_pages, listing_key
    from longdoc.experiments.cache import cached_directory
    from longdoc.models.backbone import weights_version

    config = BUILT_BACKBONES[name]
    pages = installed_pages()
    listing = listing_key(pages)
    benchmark_ids, benchmark_bodies, checksum = benchmark_documents()

    def build(directory: Path) -> None:
        from longdoc.data.installed_pages import INSTALLED_PAGES, installed_page_corpus, page_packages
        from longdoc.data.page_curation import curate_pages
        from longdoc.data.registry import DATA_DIR
        from longdoc.models.backbone import load_tokenizer
        from longdoc.train.mlm_backbone import train_mlm_backbone

        began = time.perf_counter()
        ids, texts = installed_page_corpus(DATA_DIR, progress=progress)
        curated = curate_pages(
            ids,
            texts,
            page_packages(pages),
            benchmark_ids,
            benchmark_bodies,
            config.held_out_share,
            config.max_package_share,
        )
        manifest_file = DATA_DIR / INSTALLED_PAGES / listing / "manifest.json"
        corpus = {
            "name": INSTALLED_PAGES,
            "manifest": json.loads(manifest_file.read_text(encoding="utf-8")) if manifest_file.is_file() else {},
            "listing": listing,
            "excluded_benchmark": {"name": EXCLUDED_BENCHMARK, "checksum": checksum, "documents": len(benchmark_ids)},
            "curation": curated.report,
            "corpus_seconds": time.perf_counter() - began,
        }
        train_mlm_backbone(
            curated.ids, curated.texts, curated.held_out, load_tokenizer(TOKENIZER), config, directory, corpus, progress
        )

    return cached_directory(
        "backbone",
        build,
        code_modules=BUILDER_MODULES,
        name=name,
        recipe=asdict(config),
        pages=listing,
        excluded=checksum,
        tokenizer=f"{TOKENIZER} {weights_version(TOKENIZER)}",
    )


def tokenizer_name(name: str) -> str:
    """What to load backbone ``name``'s tokenizer from without building it (a built one saves the packaged
    tokenizer: counting tokens never waits an hour for weights)."""
    return TOKENIZER if is_built(name) else name


def backbone_path(name: str, progress: bool = True) -> str:
    """Where backbone ``name`` is read from: a built one's cache folder by its portable name
    (``cache:backbone/<key>``: what every downstream key and record holds, wherever the checkout or the
    cache is; :func:`longdoc.models.backbone.resolve_backbone` reads it), any other name as it is."""
    from longdoc.experiments.cache import portable

    return portable(built_backbone(name, progress)) if is_built(name) else name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.backbones", description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(BUILT_BACKBONES))
    parser.add_argument("--measure", action="store_true", help="time a few steps in fp32 and bf16, build nothing")
    parser.add_argument("--steps", type=int, default=8, help="steps timed per precision (--measure)")
    args = parser.parse_args(argv)
    if args.measure:
        from longdoc.models.backbone import load_tokenizer
        from longdoc.train.mlm_backbone import measure_throughput

        for precision in ("fp32", "bf16"):
            config = replace(BUILT_BACKBONES[args.name], precision=precision)
            rate = measure_throughput(config, load_tokenizer(TOKENIZER), args.steps)
            print(f"{args.name} {precision}: {rate:,.0f} tokens/s")
        return 0
    problem = build_problem(args.name)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    folder = built_backbone(args.name)
    record = json.loads((folder / RECORD).read_text())
    held = record["held_out"]
    print(
        f"{args.name}: {folder}\n{record['parameters']:,} parameters, {record['config']['steps']} steps, "
        f"{record['tokens_seen']:,} tokens in {record['seconds'] / 60:.1f} min; held-out MLM loss "
        f"{held['loss']:.3f}, accuracy {held['accuracy']:.3f} ({held['predicted']:,} masked tokens)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
