"""The ``--json`` contracts of the inspection commands, exactly: every key, numbers to 6 decimals (``nothing`` to
9), NaN as null, positions counting from 1. Each record is filled by hand with numbers of more decimals than the
contract keeps, so a key renamed or a number rounded otherwise fails here (docs/command-line.md)."""

import math
from types import SimpleNamespace

import torch

from transformer.inside.attribution import Attribution
from transformer.inside.contrastive import ContrastiveEvidence
from transformer.inside.contributions import Contributions
from transformer.inside.patching import Patching

NAN = float("nan")
TRANSLATION = SimpleNamespace(source_text="a b", text="x y", source_pieces=["▁a", "▁b", "</s>"],
                              target_pieces=["<s>", "▁x", "▁y"], predicted_pieces=["▁x", "▁y", "</s>"])


def test_patching_names_every_grid_and_check_and_counts_positions_from_1():
    patched = Patching(step=2, target="▁y", alternative="▁z", clean_difference=1.23456789,
                       corrupted_difference=-0.98765432,
                       encoder_positions=torch.tensor([[0.1234567, NAN, 0.5], [0.25, 0.5, 0.75]], dtype=torch.float64),
                       heads={"encoder": torch.tensor([[0.1111111, 0.2]], dtype=torch.float64),
                              "decoder": torch.tensor([[0.0, 0.3333333]], dtype=torch.float64),
                              "cross": torch.tensor([[0.4444444, 0.5]], dtype=torch.float64)},
                       decoder_layers=torch.tensor([0.6666666, 1.0], dtype=torch.float64), nothing=1.23456789e-8,
                       last_encoder_layer_all_positions={"restored": 1.0, "max_logit_difference": 0.0,
                                                         "every_position_paired": True},
                       alignment=[(0, 0), (2, 1)], corrupted_source=["▁a", "</s>"])
    assert patched.to_json(TRANSLATION) == {
        "step": 2, "target": "▁y", "alternative": "▁z", "source_tokens": ["▁a", "▁b", "</s>"],
        "corrupted_source_tokens": ["▁a", "</s>"], "target_tokens": ["<s>", "▁x", "▁y"], "translation": "x y",
        "clean_difference": 1.234568, "corrupted_difference": -0.987654,
        "encoder_positions": [[0.123457, None, 0.5], [0.25, 0.5, 0.75]],
        "heads": {"encoder": [[0.111111, 0.2]], "decoder": [[0.0, 0.333333]], "cross": [[0.444444, 0.5]]},
        "decoder_layers": [0.666667, 1.0], "nothing": 1.2e-08,
        "last_encoder_layer_all_positions": {"restored": 1.0, "max_logit_difference": 0.0,
                                             "every_position_paired": True},
        "alignment": [[1, 1], [3, 2]]}


def test_contributions_give_each_step_its_shares_and_each_layers_source_share():
    source = torch.tensor([[[0.0, 0.1, 0.0], [0.2, 0.0, 0.0], [0.1, 0.0, 0.0]],
                           [[0.1, 0.2, 0.0], [0.3, 0.1, 0.1], [0.2, 0.2, 0.2]],
                           [[0.4, 0.3000001, 0.0], [0.5, 0.1, 0.1234567], [0.1, 0.1, 0.1]]], dtype=torch.float64)
    prefix = torch.ones(3, 3, 3, dtype=torch.float64) * 0.1
    contributions = Contributions(source, prefix, torch.eye(3), {})
    steps = contributions.to_json(TRANSLATION)["steps"]
    assert contributions.to_json(TRANSLATION) == {
        "method": "alti_plus", "source": "a b", "translation": "x y", "source_tokens": ["▁a", "▁b", "</s>"],
        "target_tokens": ["<s>", "▁x", "▁y"], "predicted_tokens": ["▁x", "▁y", "</s>"], "steps": steps}
    assert steps[0] == {"token": "▁x", "source_share": 0.7, "prefix_share": 0.3, "source": [0.4, 0.3, 0.0],
                        "prefix": [0.1], "source_share_by_layer": [0.1, 0.3, 0.7]}
    assert steps[1]["source_share"] == 0.723457 and steps[1]["prefix_share"] == 0.276543
    assert steps[1]["prefix"] == [0.1, 0.1] and steps[2]["source_share_by_layer"] == [0.1, 0.6, 0.3]


def test_contrastive_evidence_keeps_its_prefix_to_the_step_and_states_completeness_for_integrated_gradients():
    evidence = ContrastiveEvidence("integrated_gradients", 2, "▁y", "▁z", source=torch.tensor([0.1234567, -0.5]),
                                   prefix=torch.tensor([0.25, 0.7654321]), contrast=1.23456789,
                                   baseline_contrast=-0.1234567, completeness_gap=0.0001234567)
    assert evidence.to_json(TRANSLATION) == {
        "method": "integrated_gradients", "step": 2, "chosen": "▁y", "alternative": "▁z",
        "source_tokens": ["▁a", "▁b", "</s>"], "prefix_tokens": ["<s>", "▁x"], "source": [0.123457, -0.5],
        "prefix": [0.25, 0.765432], "contrast": 1.234568, "baseline_contrast": -0.123457, "completeness_gap": 0.000123}
    gradient = ContrastiveEvidence("gradient_x_input", 1, "▁x", "▁z", source=torch.tensor([1.0, 2.0]),
                                   prefix=torch.tensor([0.5]), contrast=0.5)
    assert "completeness_gap" not in gradient.to_json(TRANSLATION)
    assert gradient.to_json(TRANSLATION)["prefix_tokens"] == ["<s>"]


def test_attributions_name_every_output_tokens_row_and_integrated_gradients_their_gap():
    scores = torch.tensor([[0.1234567, 0.5, math.pi]], dtype=torch.float64)
    assert Attribution("rollout", scores).to_json(TRANSLATION) == {
        "method": "rollout", "translation": "x y", "source_tokens": ["▁a", "▁b", "</s>"],
        "target_tokens": ["<s>", "▁x", "▁y"], "predicted_tokens": ["▁x", "▁y", "</s>"],
        "attribution": [[0.123457, 0.5, 3.141593]]}
    with_gap = Attribution("integrated_gradients", scores, torch.tensor([0.0001234567], dtype=torch.float64))
    assert with_gap.to_json(TRANSLATION)["completeness_gap"] == [0.000123]
