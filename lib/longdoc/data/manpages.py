"""The embedded benchmark ``manpages`` (DESIGN.md section 3): real long text that ships with Debian.

Documents are the real pages of the ``manpages`` and ``manpages-dev`` packages (symlinks and ``.so``
alias pages are not documents: they resolve to the page they point to), rendered to plain text by the
system's own ``man``/``groff`` with hyphenation and justification off and a very wide line, overstrikes
removed. A document is ``name.section``, titled ``name(section)``, and its text is every section but
NAME. The query is the NAME line's description after the dash; pages sharing one description share one
query. Queries are hashed into train/dev/test (60/20/20). Document pairs for matching come from the SEE
ALSO links (:mod:`longdoc.data.see_also_pairs`). Building twice gives byte-identical files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from longdoc.data.beir import Document, RetrievalDataset, save_beir
from longdoc.data.pairs import save_pairs
from longdoc.data.see_also_pairs import PairThresholds, build_see_also_pairs, save_links
from longdoc.data.splits import hashed_split
from longdoc.io import atomic_directory, atomic_write
from longdoc.progress import tqdm

PACKAGES = ("manpages", "manpages-dev")
SPLIT_SHARES = (("train", 60), ("dev", 20), ("test", 20))
BUILDER_VERSION = (
    2  # raised when the builder's output changes (2: balanced pairs in 40/30/30, links/); an older build is rebuilt
)
_PAGE_DIR = re.compile(r"^/usr/share/man/man[^/]+/[^/]+$")
_SECTION_HEADING = re.compile(r"^[A-Z][A-Z0-9 ,/()'&_-]*$")
_NAME_DASH = re.compile(r"\s[-\u2010-\u2015\u2212]+\s")
_REFERENCE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.:+-]*)\((\d[a-zA-Z]*)\)")
_OVERSTRIKE = re.compile(r".\x08")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class RenderedPage:
    doc_id: str
    title: str
    description: str | None  # the NAME line after the dash: the query
    text: str  # every section but NAME
    see_also: tuple[str, ...]  # referenced page ids (unresolved)


def page_id(path: str | Path) -> str:
    """``/usr/share/man/man2/open.2.gz`` -> ``open.2``."""
    name = Path(path).name
    return name[:-3] if name.endswith(".gz") else name


def _read_source(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def so_target(path: Path) -> str | None:
    """The page an alias page (a lone ``.so manN/target.N`` request) points to, else None."""
    lines = [ln for ln in _read_source(path).splitlines() if ln.strip() and not ln.startswith(('.\\"', "'\\\""))]
    if len(lines) == 1 and lines[0].startswith(".so "):
        return page_id(lines[0].split()[1])
    return None


def list_package_pages(packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """English pages installed by the Debian packages, from ``dpkg -L``."""
    listing = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True)
    if listing.returncode != 0:
        raise RuntimeError(
            f"dpkg -L {' '.join(packages)} failed ({listing.stderr.strip()}); install them with "
            f"'apt-get install {' '.join(packages)}' or pass source=<a directory of man pages>"
        )
    return sorted(Path(p) for p in listing.stdout.splitlines() if _PAGE_DIR.match(p) and Path(p).is_file())


def list_directory_pages(directory: Path) -> list[Path]:
    pattern = re.compile(r"^[^.].*\.\d[a-zA-Z]*(\.gz)?$")
    return sorted(p for p in directory.rglob("*") if p.is_file() and pattern.match(p.name))


def classify_pages(paths: list[Path]) -> tuple[list[Path], dict[str, str]]:
    """Split into real pages and an alias map ``alias id -> id of the page it points to``."""
    real, aliases = [], {}
    for path in paths:
        if path.is_symlink():
            aliases[page_id(path)] = page_id(path.resolve())
        elif (target := so_target(path)) is not None:
            aliases[page_id(path)] = target
        else:
            real.append(path)
    return real, aliases


def render(path: Path) -> str:
    """Plain text of one page by the system's man/groff: no hyphenation, no justification, wide lines."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C.UTF-8",
        "MANWIDTH": "4000",
        "MANPAGER": "cat",
        "PAGER": "cat",
        "GROFF_NO_SGR": "1",
    }
    done = subprocess.run(
        ["man", "--no-hyphenation", "--no-justification", "-E", "UTF-8", "-l", str(path)],
        capture_output=True,
        env=env,
    )
    if done.returncode != 0 or not done.stdout:
        raise RuntimeError(f"man could not render {path}: {done.stderr.decode(errors='replace').strip()}")
    text = done.stdout.decode("utf-8", errors="replace")
    return _ANSI.sub("", _OVERSTRIKE.sub("", text)).expandtabs()


def parse_rendered(doc_id: str, rendered: str) -> RenderedPage:
    """Split rendered text into sections; drop the running header and footer lines."""
    lines = [ln.rstrip() for ln in rendered.splitlines()]
    content = [i for i, ln in enumerate(lines) if ln.strip()]
    if len(content) < 3:
        raise ValueError(f"{doc_id}: rendered page has no body")
    body = lines[content[0] + 1 : content[-1]]  # without header and footer
    sections: list[tuple[str, list[str]]] = []
    for line in body:
        if line and not line[0].isspace() and _SECTION_HEADING.match(line):
            sections.append((line.strip(), []))
        elif sections:
            stripped = " ".join(line.split())
            if stripped:
                sections[-1][1].append(stripped)
    name_lines = next((text for heading, text in sections if heading == "NAME"), [])
    name_line = " ".join(name_lines)
    parts = _NAME_DASH.split(name_line, maxsplit=1)
    description = " ".join(parts[1].split()) if len(parts) == 2 and parts[1].strip() else None
    text = "\n".join(line for heading, text in sections if heading != "NAME" for line in [heading, *text])
    see_also = tuple(
        f"{name}.{section}"
        for heading, text in sections
        if heading == "SEE ALSO"
        for name, section in _REFERENCE.findall(" ".join(text))
    )
    name, _, section = doc_id.rpartition(".")
    return RenderedPage(doc_id, f"{name}({section})", description, text, see_also)


def query_id(description: str) -> str:
    return "q" + hashlib.sha256(description.encode()).hexdigest()[:12]


def split_of(qid: str) -> str:
    return hashed_split(qid, SPLIT_SHARES, salt="split")


def tool_version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def _package_versions(packages: tuple[str, ...]) -> dict[str, str]:
    versions = {}
    for package in packages:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
        versions[package] = out.stdout.strip() if out.returncode == 0 else "not installed"
    return versions


def assemble(pages: list[RenderedPage], aliases: dict[str, str]) -> tuple[RetrievalDataset, dict]:
    """Documents, queries, splits and qrels from rendered pages; returns the dataset and counts."""
    corpus = {p.doc_id: Document(p.doc_id, p.title, p.text) for p in pages if p.text.strip()}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, dict[str, int]]] = {split: {} for split, _ in SPLIT_SHARES}
    for page in pages:
        if page.description is None or page.doc_id not in corpus:
            continue
        qid = query_id(page.description)
        queries[qid] = page.description
        qrels[split_of(qid)].setdefault(qid, {})[page.doc_id] = 1
    counts = {
        "pages_rendered": len(pages),
        "documents": len(corpus),
        "empty_pages_skipped": len(pages) - len(corpus),
        "pages_without_description": sum(p.description is None for p in pages),
        "aliases": len(aliases),
        "queries": len(queries),
        "queries_per_split": {split: len(q) for split, q in qrels.items()},
        "judgements_per_split": {split: sum(map(len, q.values())) for split, q in qrels.items()},
    }
    return RetrievalDataset("manpages", corpus, queries, qrels), counts


def resolve_links(pages: list[RenderedPage], aliases: dict[str, str], corpus: dict) -> dict[str, set[str]]:
    """Outgoing SEE ALSO links of every document, aliases resolved, restricted to the corpus, no self-links."""

    def resolve(target: str) -> str:
        seen = set()
        while target in aliases and target not in seen:
            seen.add(target)
            target = aliases[target]
        return target

    links = {}
    for page in pages:
        if page.doc_id in corpus:
            targets = {resolve(t) for t in page.see_also}
            links[page.doc_id] = {t for t in targets if t in corpus and t != page.doc_id}
    return links


def _checksums(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def build_manpages(
    out_dir: str | Path,
    source: str | Path | None = None,
    thresholds: PairThresholds = PairThresholds(),
    workers: int = 4,
    progress: bool = True,
) -> Path:
    """Build the benchmark into ``out_dir`` (atomically). ``source`` is a directory of man pages, or
    None for the installed Debian packages."""
    if source is None:
        paths, origin = list_package_pages(), {"packages": _package_versions(PACKAGES)}
    else:
        source = Path(source)
        if not source.is_dir():
            raise FileNotFoundError(f"source={source}: not a directory of man pages")
        paths, origin = list_directory_pages(source), {"directory": str(source)}
    if not paths:
        raise RuntimeError(f"no man pages found in {source or PACKAGES}")
    real, aliases = classify_pages(paths)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rendered = list(tqdm(pool.map(render, real), total=len(real), desc="rendering man pages", disable=not progress))
    pages = [parse_rendered(page_id(p), text) for p, text in zip(real, rendered)]
    ids = [p.doc_id for p in pages]
    if len(set(ids)) != len(ids):
        duplicate = sorted({i for i in ids if ids.count(i) > 1})[0]
        raise ValueError(f"two pages are both called {duplicate!r}")
    dataset, counts = assemble(pages, aliases)
    links = resolve_links(pages, aliases, dataset.corpus)
    pairs, pair_counts = build_see_also_pairs(links, thresholds)
    counts.update(pair_counts)
    out_dir = Path(out_dir)
    with atomic_directory(out_dir) as tmp:
        save_beir(dataset, tmp)
        save_pairs(pairs, tmp)
        counts["linking_pages_per_split"] = save_links(links, tmp)
        files = _checksums(tmp)
        manifest = {
            "name": "manpages",
            "builder_version": BUILDER_VERSION,
            "source": origin,
            "renderer": {"man": tool_version(["man", "--version"]), "groff": tool_version(["groff", "--version"])},
            "render_options": "man --no-hyphenation --no-justification -E UTF-8 -l, MANWIDTH=4000, LC_ALL=C.UTF-8",
            "split_shares": dict(SPLIT_SHARES),
            "pair_thresholds": thresholds.as_dict(),
            "counts": counts,
            "files": files,
            "checksum": hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest(),
        }
        with atomic_write(tmp / "manifest.json") as handle:
            json.dump(manifest, handle, indent=2, sort_keys=True)
            handle.write("\n")
    return out_dir
