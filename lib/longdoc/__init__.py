"""longdoc: dense retrieval and matching of long documents.

Where things live (one concept per module):

- ``data/``      corpora in the BEIR layout, importers of the papers' datasets, the ``manpages`` benchmark
- ``text/``      WordPiece tokenization into 512-token segments (FirstP / MaxP inputs)
- ``models/``    backbone loading and the bi-encoders built on a shared interface
- ``losses/``    pure tensor losses (contrastive with in-batch and hard negatives)
- ``train/``     the one training loop (HF Accelerate), hard-negative mining, cross-device gathering
- ``index/``     FAISS search (single- and multi-vector), BM25
- ``eval/``      trec_eval-compatible metrics, TREC run files, significance tests
- ``experiments/`` what the notebooks call: baselines, results, caching
- ``sharding.py`` work shared across processes; ``io.py`` atomic writes; ``progress.py`` progress bars
"""

import warnings

__version__ = "0.1.0"

# transformers imports tqdm.auto, which warns in a notebook kernel without ipywidgets; our bars are
# text bars (longdoc.progress) and nothing downloads at run time, so the warning says nothing useful
warnings.filterwarnings("ignore", message="IProgress not found")
