"""Backbones the project builds itself, selected by name like any other (``backbone: manpages-mlm``).

``manpages-mlm`` is the MLM-only BERT of :mod:`longdoc.train.mlm_backbone` (6 layers like the packaged
MiniLM, so every depth setting of the profiles reads it; hidden 256, 4 heads), trained from random weights on this machine's installed man pages outside the benchmark. ``manpages-mlm-base`` is the
same command at BERT-base's shape for GPU nodes. ``tiny-random-bert`` is a BERT of random weights, never
trained (6 layers of width 64, so every depth setting of the profiles reads it): the smoke profile's
backbone, built in a second, which checks every mechanism and no claim (:data:`RANDOM_BACKBONES`). A notebook whose backbone is one of them builds it on
first use (:meth:`longdoc.experiments.study.Study.settings` puts its cache folder where the name was); the
command builds it ahead::

    python -m longdoc.experiments.backbones manpages-mlm           # build (or find) it, print its record
    python -m longdoc.experiments.backbones manpages-mlm --measure  # tokens/s in fp32 and bf16, nothing built

It is cached under ``backbone/<key>``: the recipe, the listing of installed pages, the benchmark's
source pages and builder, the tokenizer's package and the code of the modules that build it (not the
whole package's: a later change elsewhere keeps it); a random one's key holds its recipe, its tokenizer and
the code that draws it. A study names it by that folder
(:func:`backbone_path`, computed without building); the first load of its weights or tokenizer builds it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from longdoc.models.backbone import random_backbone, register_cached_resolver
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


@dataclass(frozen=True)
class RandomBackbone:
    """A BERT of random weights drawn under ``seed`` and never trained (no start any paper assumes)."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    init_std: float = 0.02  # BERT's initializer_range
    positions: int = 512  # :data:`POSITIONS`, as every built backbone (a test checks)
    seed: int = 0


# the smoke profile's backbone (CI's nbval and the notebooks' defaults): 2.3 M parameters, 9 MB, where the
# packaged MiniLM's 22.7 M took 88 MB a fit (13 GB of smoke cache) and notebook 10 6.6 times as long.
# Drawn at BERT's 0.02, a random 6-layer BERT attends almost uniformly, so every document's [CLS] vector is
# the same to a cosine of 0.99999 and its 200 smoke scores sit 2e-6 apart (float32's own resolution at
# them): rankings and stored outputs would be rounding noise. At 0.1 and width 64 the documents' [CLS]
# vectors are 0.985 apart, tokens within one keep apart (0.73), 1.0% of adjacent scores lie within 1e-4
# (the packaged MiniLM: 1.2% within 10 times float32's error) and a first contrastive step's gradient is sane
RANDOM_BACKBONES = {
    "tiny-random-bert": RandomBackbone(layers=6, hidden=64, heads=4, intermediate=256, init_std=0.1),
}
# the code that draws one (its key's fingerprint): the drawing function, the seeding, and this module, which
# calls it (cheap to redraw, so any edit here redraws it; the MLM-trained ones leave it out: an hour to rebuild)
RANDOM_BUILDER_MODULES = ("models/backbone.py", "seeding.py", "experiments/backbones.py")
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
)


def is_built(name: str) -> bool:
    """A backbone the project builds, MLM-trained (:data:`BUILT_BACKBONES`) or random
    (:data:`RANDOM_BACKBONES`): found by name and kept in the cache by its key."""
    return str(name) in BUILT_BACKBONES or str(name) in RANDOM_BACKBONES


def is_mlm_built(name: str) -> bool:
    """An MLM-trained backbone built here (:data:`BUILT_BACKBONES`)."""
    return str(name) in BUILT_BACKBONES


def is_random(name: str) -> bool:
    """A backbone of random weights built here (:data:`RANDOM_BACKBONES`), by its name or its cache folder's
    portable name (``cache:backbone/<key>``): today's recipe's, or any folder whose key names a random draw
    (one drawn by other code or package versions, or imported)."""
    name = str(name)
    if name in RANDOM_BACKBONES:
        return True
    if not name.startswith("cache:backbone/"):
        return False
    if any(_portable_folder(random) == name for random in RANDOM_BACKBONES):
        return True
    from longdoc.experiments.cache import CACHE_DIR

    key = Path(CACHE_DIR) / name.removeprefix("cache:") / "key.json"
    try:
        return "random" in json.loads(key.read_text())
    except (OSError, ValueError):
        return False


MLM_TRAINED = "an MLM-trained encoder"
RANDOM_WEIGHTS = "random weights"  # as longdoc.experiments.preconditions.RANDOM names the start (a test checks)


def mlm_head_trained(path: str) -> bool:
    """Whether the backbone folder holds trained MLM head weights (an MLM-trained encoder, as BERT; the
    packaged MiniLM, a contrastive sentence encoder, has none)."""
    from transformers import BertForMaskedLM

    try:
        _, info = BertForMaskedLM.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError):
        return False
    return not any(key.startswith("cls.") for key in info["missing_keys"])


@functools.cache
def backbone_training(backbone: str) -> str:
    """How ``backbone`` (a name, a folder, or a built one's ``cache:`` name) was trained, in words that
    start with :data:`MLM_TRAINED` where it is one: built here (MLM only), or a folder with trained MLM
    head weights; a random one built here is :data:`RANDOM_WEIGHTS`; any other has no MLM head to show for
    it (the packaged MiniLM: a contrastive sentence encoder trained with mean pooling)."""
    from longdoc.models.backbone import CACHED, resolve_backbone

    if is_random(backbone):  # the precondition of a claim's start reads it as random weights
        return RANDOM_WEIGHTS
    if is_mlm_built(backbone) or str(backbone).startswith(f"{CACHED}backbone/"):
        return f"{MLM_TRAINED} (built here: {backbone})"
    if mlm_head_trained(str(resolve_backbone(backbone))):
        return f"{MLM_TRAINED} ({backbone}: trained MLM head)"
    return f"{backbone}, without a trained MLM head (a contrastive sentence encoder, as the packaged MiniLM)"


def build_problem(name: str) -> str | None:
    """Why backbone ``name`` could not be built here, or None (the check before any notebook starts)."""
    from longdoc.data.installed_pages import installed_pages_problem

    if str(name) in RANDOM_BACKBONES:  # drawn, not trained: it reads no page
        return None
    problem = installed_pages_problem()
    return f"it is trained here on the installed man pages, and {problem}" if problem else None


_DETERMINANTS: dict[tuple, dict] = {}  # (name, recipe) -> its cache determinants, once per process


def determinants(name: str) -> dict:
    """What the built backbone ``name`` is keyed by: its recipe, the contents of the installed pages, the
    excluded benchmark's source pages and builder, the tokenizer (computed in a second or two, once per
    process; nothing is built); a random one's by its recipe and tokenizer alone."""
    from longdoc.models.backbone import weights_version

    if str(name) in RANDOM_BACKBONES:
        tokenizer = f"{TOKENIZER} {weights_version(TOKENIZER)}"
        return {"name": name, "random": asdict(RANDOM_BACKBONES[name]), "tokenizer": tokenizer}
    if not is_built(name):
        raise ValueError(
            f"backbone={name!r} is not built by the project ({sorted(BUILT_BACKBONES) + sorted(RANDOM_BACKBONES)})"
        )
    memo = (name, BUILT_BACKBONES[name], EXCLUDED_BENCHMARK)
    if memo not in _DETERMINANTS:
        from longdoc.data.installed_pages import benchmark_files, installed_pages, listing_key
        from longdoc.data.manpages import BUILDER_VERSION, PACKAGES

        sources = sorted(Path(f) for f in benchmark_files() if Path(f).is_file())
        _DETERMINANTS[memo] = {
            "name": name,
            "recipe": asdict(BUILT_BACKBONES[name]),
            "pages": listing_key(installed_pages()),
            "excluded": f"{EXCLUDED_BENCHMARK}: {', '.join(PACKAGES)} {listing_key(sources)}, builder {BUILDER_VERSION}",
            "tokenizer": f"{TOKENIZER} {weights_version(TOKENIZER)}",
        }
    return _DETERMINANTS[memo]


def _builder_modules(name: str) -> tuple[str, ...]:
    return RANDOM_BUILDER_MODULES if str(name) in RANDOM_BACKBONES else BUILDER_MODULES


def backbone_folder(name: str) -> Path:
    """Where built backbone ``name`` is (or will be) cached; nothing is built."""
    from longdoc.experiments.cache import cache_folder

    return cache_folder("backbone", _builder_modules(name), **determinants(name))


def _portable_folder(name: str) -> str:
    from longdoc.experiments.cache import portable

    return portable(backbone_folder(name))


def built_backbone(name: str, progress: bool = True) -> Path:
    """The folder of built backbone ``name``, trained on first use (up to an hour on 2 cores; a random one is
    drawn in a second)."""
    from longdoc.experiments.cache import cached_directory
    from longdoc.train.mlm_backbone import build_on_installed_pages

    keyed_by = determinants(name)  # refuses a name that is not built here
    if name in RANDOM_BACKBONES:
        recipe = RANDOM_BACKBONES[name]
        return cached_directory(
            "backbone",
            lambda directory: random_backbone(
                directory,
                recipe.hidden,
                recipe.layers,
                recipe.heads,
                recipe.intermediate,
                recipe.positions,
                recipe.seed,
                TOKENIZER,
                recipe.init_std,
            ),
            code_modules=RANDOM_BUILDER_MODULES,
            **keyed_by,
        )
    return cached_directory(
        "backbone",
        lambda directory: build_on_installed_pages(
            directory, BUILT_BACKBONES[name], TOKENIZER, EXCLUDED_BENCHMARK, progress
        ),
        code_modules=BUILDER_MODULES,
        **keyed_by,
    )


def build_portable(portable_name: str, progress: bool = True) -> Path | None:
    """The folder of the built backbone whose portable name (``cache:backbone/<key>``) is ``portable_name``,
    trained if it is missing; None when no recipe here has that key (another checkout's code or pages)."""
    for name in [*RANDOM_BACKBONES, *BUILT_BACKBONES]:  # the random ones first: their keys read no pages
        if _portable_folder(name) == portable_name:
            return built_backbone(name, progress)
    return None


def resolve_cached(name: str) -> Path | None:
    """The folder of a ``cache:backbone/<key>`` name: found in the cache, or built when a recipe here has
    that key (:func:`build_portable`); registered with :func:`longdoc.models.backbone.resolve_backbone`."""
    from longdoc.experiments.cache import CACHE_DIR
    from longdoc.models.backbone import CACHED

    folder = Path(CACHE_DIR) / name[len(CACHED) :]
    return folder if (folder / "config.json").is_file() else build_portable(name)


register_cached_resolver(resolve_cached)


def tokenizer_name(name: str) -> str:
    """What to load backbone ``name``'s tokenizer from without building it (a built one saves the packaged
    tokenizer: counting tokens never waits an hour for weights)."""
    return TOKENIZER if is_built(name) else name


POSITIONS = 512  # position embeddings of every built backbone (train.mlm_backbone.new_model; a test checks)


def position_embeddings(backbone: str) -> int:
    """How many positions ``backbone`` embeds, read without building it: a built one's (by its name or its
    ``cache:`` name) is :data:`POSITIONS`, any other's comes from its config."""
    from longdoc.models.backbone import CACHED, resolve_backbone

    if is_built(backbone) or str(backbone).startswith(CACHED):
        return POSITIONS
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(resolve_backbone(backbone)).max_position_embeddings


def backbone_path(name: str) -> str:
    """Where backbone ``name`` is read from: a built one's cache folder by its portable name
    (``cache:backbone/<key>``: what every downstream key and record holds, wherever the checkout or the
    cache is; :func:`longdoc.models.backbone.resolve_backbone` reads it and builds it on first use), any
    other name as it is. Nothing is built here: a study or a planner can name it for free."""
    return _portable_folder(name) if is_built(name) else name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.backbones", description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(BUILT_BACKBONES) + sorted(RANDOM_BACKBONES))
    parser.add_argument("--measure", action="store_true", help="time a few steps in fp32 and bf16, build nothing")
    parser.add_argument("--steps", type=int, default=8, help="steps timed per precision (--measure)")
    args = parser.parse_args(argv)
    if args.measure and args.name in RANDOM_BACKBONES:
        parser.error(f"--measure times training; {args.name} is drawn, never trained")
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
    if args.name in RANDOM_BACKBONES:
        print(f"{args.name}: {folder} (random weights, {RANDOM_BACKBONES[args.name]})")
        return 0
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
