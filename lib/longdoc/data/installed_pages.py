"""Unjudged text to pre-train on: the English man pages of every *other* installed Debian package.

The papers pre-train on corpora far larger than their judged collections (Longtriever: BookCorpus and
English Wikipedia); the embedded benchmark has 1,100 pages, and nothing can be downloaded. A machine
with the benchmark installed usually holds thousands more man pages (this one: 18,663 beside the
benchmark's 2,546 files), real long technical text of the same kind, none of them judged: the pages
under ``/usr/share/man/man*/`` that ``manpages`` and ``manpages-dev`` do not own (``dpkg -L``), so no
benchmark document is among them. They are rendered as the benchmark's are
(:func:`longdoc.data.manpages.render`); a page ``man`` cannot render is skipped and counted.

``pretrain_corpus="installed-manpages"`` reads them; the corpus is built once per listing of pages
(their paths and contents: another machine's packages make another corpus) under
``<data>/installed-manpages/<key>/`` with a manifest of what went in.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from longdoc.data.beir import Document, read_corpus, write_jsonl
from longdoc.data.manpages import PACKAGES, classify_pages, page_id, parse_rendered, render, tool_version
from longdoc.io import atomic_directory, sweep_stale
from longdoc.progress import tqdm

INSTALLED_PAGES = "installed-manpages"  # the pretrain_corpus value
MAN_ROOT = Path("/usr/share/man")
DPKG_INFO = Path("/var/lib/dpkg/info")  # <package>[:arch].list: the files each installed package owns
FEWEST_PAGES = 200  # fewer than this is not a pre-training corpus worth the name (the benchmark has 1,100)


def benchmark_files(packages: tuple[str, ...] = PACKAGES) -> set[str]:
    """Every file the benchmark's packages own (none when dpkg does not know them)."""
    listing = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True)
    return set(listing.stdout.splitlines()) if listing.returncode == 0 else set()


def installed_pages(root: Path = MAN_ROOT, exclude: set[str] | None = None) -> list[Path]:
    """English man pages under ``root/man*/`` outside ``exclude`` (default: the benchmark's files)."""
    exclude = benchmark_files() if exclude is None else exclude
    return sorted(
        p for p in root.glob("man*/*") if p.is_file() and str(p) not in exclude and not p.name.startswith(".")
    )


def installed_pages_problem(root: Path = MAN_ROOT) -> str | None:
    """Why this machine's man pages cannot make a corpus (no ``man``, too few pages), or None."""
    if shutil.which("man") is None:
        return "the man command is missing (install man-db)"
    found = len(installed_pages(root)) if root.is_dir() else 0
    if found < FEWEST_PAGES:
        return f"only {found} man pages outside the benchmark's packages under {root} (at least {FEWEST_PAGES})"
    return None


def listing_key(paths: list[Path]) -> str:
    """What identifies a listing of pages: their paths and contents (a link by its target), so two machines
    with the same packages find the same corpus, and a reinstall that only touches the files keeps it."""
    digest = hashlib.sha256()
    for path in paths:
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        digest.update(f"{path}\0{hashlib.sha256(content).hexdigest()}\n".encode())
    return digest.hexdigest()[:16]


def page_packages(paths: list[Path], info_dir: Path = DPKG_INFO) -> dict[str, str]:
    """Page id -> the Debian package that owns its file (dpkg's file lists); a page no list names is left
    out. Pages of one id keep the first path's package, as the corpus keeps the first page."""
    owner: dict[str, str] = {}
    for listing in sorted(info_dir.glob("*.list")):
        package = listing.name[: -len(".list")].split(":")[0]
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(str(MAN_ROOT) + "/"):
                owner[line] = package
    packages: dict[str, str] = {}
    for path in paths:
        if str(path) in owner:
            packages.setdefault(page_id(path), owner[str(path)])
    return packages


def _render(path: Path) -> Document | None:
    try:
        page = parse_rendered(page_id(path), render(path))
    except (RuntimeError, ValueError):  # man could not render it, or it has no body
        return None
    text = f"{page.description}\n{page.text}" if page.description else page.text
    return Document(page.doc_id, page.title, text)


def build_page_corpus(out_dir: Path, paths: list[Path], workers: int = 4, progress: bool = True) -> Path:
    """``out_dir/corpus.jsonl`` of the rendered ``paths`` (aliases resolve to their page and are not
    documents; pages of the same name keep the first) and ``manifest.json``, written at once."""
    real, aliases = classify_pages(paths)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rendered = list(
            tqdm(pool.map(_render, real), total=len(real), desc="rendering installed man pages", disable=not progress)
        )
    corpus: dict[str, Document] = {}
    for document in rendered:
        if document is not None and document.text.strip():
            corpus.setdefault(document.doc_id, document)
    if len(corpus) < FEWEST_PAGES:
        raise ValueError(
            f"pretrain_corpus='{INSTALLED_PAGES}': only {len(corpus)} man pages outside {', '.join(PACKAGES)} render "
            f"on this machine (of {len(paths)} files under {MAN_ROOT}); install packages with man pages, or use "
            "pretrain_corpus='' (the dataset's own documents)"
        )
    with atomic_directory(out_dir) as tmp:
        write_jsonl(
            tmp / "corpus.jsonl",
            (
                {"_id": d.doc_id, "title": d.title, "text": d.text}
                for d in sorted(corpus.values(), key=lambda d: d.doc_id)
            ),
        )
        manifest = {
            "name": INSTALLED_PAGES,
            "excluded_packages": list(PACKAGES),
            "files": len(paths),
            "aliases": len(aliases),
            "documents": len(corpus),
            "not_rendered": sum(d is None for d in rendered),
            "renderer": {"man": tool_version(["man", "--version"]), "groff": tool_version(["groff", "--version"])},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out_dir


def installed_page_corpus(
    data_dir: Path, root: Path = MAN_ROOT, exclude: set[str] | None = None, progress: bool = True, workers: int = 4
) -> tuple[list[str], list[str]]:
    """``(ids, texts)`` of this machine's other man pages, built on first use (minutes: about 56 ms a
    page on one core) under ``data_dir/installed-manpages/<listing key>``."""
    paths = installed_pages(root, exclude)
    folder = Path(data_dir) / INSTALLED_PAGES
    out_dir = folder / listing_key(paths)
    sweep_stale(folder)
    if not (out_dir / "manifest.json").is_file():
        build_page_corpus(out_dir, paths, workers=workers, progress=progress)
    corpus = read_corpus(out_dir / "corpus.jsonl")
    return list(corpus), [document.full_text for document in corpus.values()]


if __name__ == "__main__":  # build ahead of the first pre-training (a GPU node's allocation need not wait for it)
    import argparse
    import os

    from longdoc.data.registry import DATA_DIR

    parser = argparse.ArgumentParser(prog="python -m longdoc.data.installed_pages", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 4, help="pages rendered at once")
    args = parser.parse_args()
    ids, _ = installed_page_corpus(DATA_DIR, workers=args.workers)
    print(f"{len(ids)} installed man pages outside {', '.join(PACKAGES)} under {DATA_DIR / INSTALLED_PAGES}")
