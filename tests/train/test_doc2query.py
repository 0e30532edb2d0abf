import torch

from longdoc.models.doc2query import Doc2Query, QueryGenerationConfig
from longdoc.train.doc2query import train_doc2query


def test_generator_from_the_backbone_learns_its_pairs_and_samples_distinct_queries(tiny_backbone):
    torch.manual_seed(0)
    config = QueryGenerationConfig(
        queries_per_document=4,
        input_length=32,
        max_query_length=8,
        train_steps=100,
        batch_size=2,
        learning_rate=3e-3,
        generate_batch_size=2,
    )
    generator = Doc2Query.from_backbone(tiny_backbone, config)
    pairs = [
        ("the kernel schedules threads " * 3, "kernel threads"),
        ("sockets carry network data " * 3, "network sockets"),
    ]
    before = generator.loss([t for t, _ in pairs], [q for _, q in pairs]).item()
    result = train_doc2query(generator, pairs, pairs, progress=False)
    after = generator.loss([t for t, _ in pairs], [q for _, q in pairs]).item()
    assert after < before / 2 and len(result.history) == 2 and "dev" in result.history[0]
    queries = generator.generate([t for t, _ in pairs], seed=1)
    assert len(queries) == 2 and all(len(q) <= 4 and len(set(q)) == len(q) and all(q) for q in queries)
    assert sum(map(len, queries)) >= 2  # empty samples are dropped, so a document may get fewer
    assert queries == generator.generate([t for t, _ in pairs], seed=1)  # seeded sampling
