"""Other GPUs and several GPUs: the published throughput figures that turn one H100's measured prices
(:mod:`longdoc.bench.gpu_hours`) into A100 and V100 hours, and price data-parallel scaling. Nothing here
was measured by this repository; each figure names where it was published.

- **A100 against H100**: MLPerf Training v2.1, closed division, NVIDIA's BERT-large pre-training on one
  8-GPU node (``mlcommons/training_results_v2.1``, ``NVIDIA/results/dgxa100_ngc22.09_pytorch/bert`` and
  ``NVIDIA/results/dgxh100_preview/bert``, the median of each system's ten logs, training samples between
  ``run_start`` and ``run_stop``): DGX A100 2,428 and DGX H100 6,711 samples per second, 2.76x. The H100
  ran FP8 through Transformer Engine (``--use_transformer_engine2``) and packed sequences; this code trains
  in bf16, so its own A100/H100 factor is likely smaller and the A100 column an upper bound.
- **V100 against A100**: NVIDIA DeepLearningExamples, ``PyTorch/LanguageModeling/BERT/README.md`` (commit
  729963dd), pytorch:21.11 container, mixed precision, one GPU: SQuAD fine-tuning 110.5 (A100 80GB) against
  52 (V100 32GB) sequences per second, 2.13x; pre-training at 512 tokens 210 against 75, 2.80x (used for
  the pre-training kind of work).
- **Scaling across GPUs**: the same README's weak scaling of SQuAD fine-tuning, which all-reduces every
  step as this code's trainers do (pre-training there accumulates gradients and scales better, 7.89):
  7.66 on 8 A100s and 7.34 on 8 V100s, efficiencies 0.958 and 0.918. For the H100 nothing comparable was
  published or measured here; the A100's is assumed. Beyond one node of 8 no per-step all-reduce figure
  was published; one node's efficiency is assumed.
"""

from __future__ import annotations

CARDS = ("H100", "A100", "V100")
A100_PER_H100 = 6711 / 2428  # MLPerf Training v2.1, BERT, one 8-GPU node (upper bound: the H100 ran FP8)
V100_PER_A100 = {"pre-training": 210 / 75, "other": 110.5 / 52}  # DeepLearningExamples BERT, mixed precision
NODE_SCALING = {"H100": 7.66 / 8, "A100": 7.66 / 8, "V100": 7.34 / 8}  # 8-GPU weak scaling (H100: A100's)
ASSUMED = {
    "H100 scaling": "the A100's (nothing published or measured for H100)",
    "beyond 8 GPUs": "one node's efficiency (no published per-step all-reduce figure across nodes)",
}


def card_factor(card: str, kind: str) -> float:
    """GPU-seconds of ``kind`` of work on ``card`` per GPU-second on one H100."""
    if card not in CARDS:
        raise ValueError(f"card {card!r}: priced cards are {', '.join(CARDS)}")
    if card == "H100":
        return 1.0
    a100 = A100_PER_H100
    return a100 if card == "A100" else a100 * V100_PER_A100["pre-training" if kind == "pre-training" else "other"]


def scaling_efficiency(card: str, gpus: int) -> float:
    """Throughput per GPU on ``gpus`` GPUs over one GPU's: 1 alone, else the card's 8-GPU weak scaling / 8
    (fewer than 8 GPUs are priced as 8 would be: an upper bound on the hours)."""
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    return 1.0 if gpus == 1 else NODE_SCALING[card]
