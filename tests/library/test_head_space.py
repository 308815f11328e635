"""A head's queries and keys over a corpus are the model's own, made comparable without changing one weight, and
projected onto their principal components, the same picture each time; the nearest tokens are the most similar
states by cosine, counted by hand."""

import math

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import head_space, one_head
from transformer.inside.corpus_run import Decoding, run_corpus
from transformer.inside.head_space import Place

SENTENCES = ["1 2 3", "4 5 6 7", "9 8 7 6 5", "3 3 1", "2 7 1 8 2 8"]


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


@pytest.fixture(scope="module")
def run(reverse, tmp_path_factory):
    return run_corpus(reverse, SENTENCES, None, tmp_path_factory.mktemp("run"), Decoding.default(reverse))


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_each_query_and_key_is_the_one_the_model_computed_in_that_sentence(reverse, run, kind):
    space = head_space.head_space(run, reverse.model, kind, layer=2, head=2)
    for number, sentence in enumerate(run.sentences):
        block = one_head.record_block(reverse.model, sentence.source_ids, sentence.target_ids, kind, 2)
        rows = [i for i, place in enumerate(space.query_places) if place.sentence == number]
        columns = [i for i, place in enumerate(space.key_places) if place.sentence == number]
        scale = block.q.abs().max()
        assert torch.allclose(space.queries[rows], block.q[1].float(), atol=2e-3 * scale)
        assert torch.allclose(space.keys[columns], block.k[1].float(), atol=2e-3 * block.k.abs().max())
        pieces = sentence.source_pieces if kind == "encoder" else sentence.target_pieces
        assert [space.query_places[i].piece for i in rows] == pieces


def test_making_queries_and_keys_comparable_changes_no_weight():
    torch.manual_seed(0)
    queries, keys = torch.randn(7, 4) * 3, torch.randn(9, 4) + 5
    moved_queries, moved_keys = head_space.comparable(queries, keys)
    assert torch.allclose((moved_queries @ moved_keys.T).softmax(-1), (queries @ keys.T).softmax(-1), atol=1e-5)
    assert torch.allclose(moved_keys.mean(0), moved_queries.mean(0), atol=1e-5)
    def spread(vectors):
        return float((vectors - vectors.mean(0)).norm(dim=-1).mean())
    assert spread(moved_keys) == pytest.approx(spread(moved_queries), rel=1e-5)


def test_the_projection_is_onto_the_two_principal_components_and_the_same_each_time():
    torch.manual_seed(1)
    queries, keys = torch.randn(30, 6) @ torch.diag(torch.tensor([5.0, 3, 1, 1, 1, 1])), torch.randn(20, 6)
    points = head_space.joint_projection(queries, keys)
    assert torch.equal(points, head_space.joint_projection(queries.clone(), keys.clone()))
    joint = torch.cat(head_space.comparable(queries, keys)).double()
    centred = joint - joint.mean(0)
    _, vectors = torch.linalg.eigh(centred.T @ centred)  # the covariance's eigenvectors, largest last
    expected = centred @ vectors[:, [-1, -2]]
    for column in range(2):
        sign = 1 if expected[expected[:, column].abs().argmax(), column] > 0 else -1
        assert torch.allclose(points[:, column].double(), sign * expected[:, column], atol=1e-4)


def test_the_nearest_tokens_are_the_most_similar_states_by_cosine_the_token_left_out():
    states = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0], [2.0, 0.5]])
    places = [Place(0, i, f"t{i}") for i in range(5)]
    found = head_space.nearest_tokens(states, places, places[0], count=3)
    cosine = [float(s @ states[0] / s.norm()) for s in states]
    assert [n.place for n in found] == [places[1], places[4], places[2]]
    assert [n.similarity for n in found] == pytest.approx([cosine[1], cosine[4], cosine[2]])
    assert math.isclose(found[0].similarity, 0.9 / math.hypot(0.9, 0.1), rel_tol=1e-6)


def test_a_token_is_found_among_the_states_entering_its_layer_and_past_the_last_the_encoders_output(run):
    states, places = head_space.token_states(run, "source", 1)
    assert len(places) == sum(len(sentence.source_pieces) for sentence in run.sentences) == len(states)
    output, _ = head_space.token_states(run, "source", 3)
    assert torch.equal(output[:len(run.sentences[0].source_pieces)], run.states[0]["memory"].float())
    target, target_places = head_space.token_states(run, "target", 2)
    assert target_places[0] == Place(0, 0, run.sentences[0].target_pieces[0])
