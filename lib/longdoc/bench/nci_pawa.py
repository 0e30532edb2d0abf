"""How the PAWA adaptor (NCI eq. 4) and the consistency loss (eq. 5) behave in training: a benchmark
that prints learning curves (nothing here is a timed test).

``python -m longdoc.bench.nci_pawa`` trains NCI decoders on a memorisation task (random six-word queries
bound to hierarchical identifiers, k = c = 5; learning them is memorising them) with a random
BERT-style encoder of ``--hidden`` (the project's backbone: 384), the project's learning rates and
warm-up, the same steps, order and seed for every variant, and prints per evaluation the share of
examples whose whole identifier is the arg-max (exact match), the cross-entropy, the adaptor's
relative change ``|h A − h| / |h|`` and the classifier inputs' norm ``|h A|``:

- **the adaptor's scale**: the plain decoder (no PAWA), PAWA as built (``(h U) Vᵀ`` scaled by
  ``1/√(d·r)``) and PAWA unscaled (``scale = 1``, the build before the scale);
- **the consistency loss** (α = 0.15, τ = 1): eq. 5 over the raw states (dot products, the paper's)
  and over unit-length states (cosine), with the loss terms and the states' norm.
"""

from __future__ import annotations

import argparse
import random

import pandas as pd


def memorisation_task(tokenizer, documents: int = 120, queries_per_document: int = 2, seed: int = 0):
    """``(identifiers, examples)``: hierarchical identifiers (k = c = 5) of random 16-d points and
    ``queries_per_document`` random six-word queries (from the WordPiece vocabulary) per document."""
    import torch

    from longdoc.index.semantic_ids import hierarchical_ids

    torch.manual_seed(seed)
    identifiers = hierarchical_ids(torch.randn(documents, 16).numpy(), k=5, c=5, seed=seed)
    words = list(tokenizer.vocab)[2000:12000]
    rng = random.Random(seed)
    examples = [(" ".join(rng.sample(words, 6)), n) for n in range(documents) for _ in range(queries_per_document)]
    return identifiers, examples


def memorisation_model(id_tokenizer, tokenizer, hidden: int, adaptor_layers: int, layers: int = 0, seed: int = 0):
    """An NCI model over a random BERT-style encoder (``layers`` layers of width ``hidden``; 0: its
    embeddings only), one decoder layer, rank 8, no dropout."""
    import torch
    from transformers import BertConfig, BertModel

    from longdoc.models.nci import NciConfig, NciModel

    torch.manual_seed(seed)
    encoder = BertModel(
        BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=hidden),
        add_pooling_layer=False,
    )
    config = NciConfig(
        backbone="random",
        vocab_size=id_tokenizer.vocab_size,
        max_id_length=id_tokenizer.depth + 1,
        decoder_layers=1,
        adaptor_layers=adaptor_layers,
        adaptor_rank=8,
        dropout=0.0,
    )
    return NciModel.build(config, encoder, tokenizer)


def exact_match(model, examples, tokens) -> float:
    """The share of ``examples`` whose whole identifier is the arg-max under teacher forcing."""
    import torch

    from longdoc.train.nci import identifier_batch

    model.eval()
    device = next(model.parameters()).device  # on a GPU, training left the model there
    with torch.no_grad():
        inputs = {k: v.to(device) for k, v in model.query_inputs([query for query, _ in examples]).items()}
        decoder_inputs, labels = identifier_batch([tokens[number] for _, number in examples])
        predicted = model(**inputs, decoder_input_ids=decoder_inputs.to(device)).logits.argmax(-1).cpu()
    return float(((predicted == labels) | (labels == -100)).all(-1).float().mean())


def learning_curve(
    variant: str, model, examples, tokens, steps: int, evaluations: int, alpha: float = 0.0, normalized=False
) -> list[dict]:
    """Train ``model`` (project learning rates and warm-up, batch 16) and return one row per evaluation:
    exact match and the mean training terms since the previous one."""
    from longdoc.train.nci import NciTrainConfig, train_nci

    config = NciTrainConfig(
        steps=steps, batch_size=16, alpha=alpha, normalized_states=normalized, eval_every=steps // evaluations
    )
    rows = []

    def evaluate(trained, step: int) -> float:
        rows.append({"variant": variant, "step": step, "exact match": exact_match(trained, examples, tokens)})
        return rows[-1]["exact match"]

    result = train_nci(model, examples, tokens, config, dev_eval=evaluate, progress=False)
    for row, record in zip(rows, result.history):
        row.update({name: round(value, 4) for name, value in record["terms"].items()})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--evaluations", type=int, default=4)
    parser.add_argument("--documents", type=int, default=120)
    args = parser.parse_args(argv)

    import torch

    from longdoc.index.semantic_ids import IdTokenizer
    from longdoc.models.backbone import load_tokenizer

    tokenizer = load_tokenizer("minilm")
    identifiers, examples = memorisation_task(tokenizer, args.documents)
    id_tokenizer = IdTokenizer.fit(identifiers)
    tokens = [id_tokenizer.encode(i) for i in identifiers]

    def model(adaptor_layers: int, scale: float | None = None):
        built = memorisation_model(id_tokenizer, tokenizer, args.hidden, adaptor_layers, args.layers)
        if scale is not None:
            built.adaptor.scale = scale
        return built

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; d = {args.hidden}, {args.steps} steps")
    rows = []
    for variant, built in (
        ("plain decoder", lambda: model(0)),
        ("PAWA, scale 1/sqrt(d r)", lambda: model(2)),
        ("PAWA, unscaled", lambda: model(2, scale=1.0)),
    ):
        rows += learning_curve(variant, built(), examples, tokens, args.steps, args.evaluations)
    print("\nThe adaptor's scale (α = 0):")
    print(pd.DataFrame(rows).to_string(index=False))
    rows = []
    for variant, normalized in (("eq. 5 on raw states (dot)", False), ("eq. 5 on unit states (cosine)", True)):
        rows += learning_curve(
            variant, model(2), examples, tokens, args.steps, args.evaluations, alpha=0.15, normalized=normalized
        )
    print("\nThe consistency loss (PAWA as built, α = 0.15, τ = 1):")
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
