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
"""

__version__ = "0.1.0"
