"""The bundled models translate exactly as they did before the model learned Marian's options (activation, position
layout, logits bias, start token): their translations, token probabilities and attention, recorded in
tests/data/bundled_outputs.json with the code of commit 838794b."""

import json
from pathlib import Path

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "bundled_outputs.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_bundled_model_outputs_are_unchanged(name):
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / name, device="cpu")
    for recorded in RECORDED[name]:
        translation = checkpoint.translate(recorded["sentence"], beam_size=recorded["beam"])
        where = f"{name}, {recorded['sentence']!r}, beam {recorded['beam']}"
        assert translation.text == recorded["text"], where
        assert translation.target_ids == recorded["target_ids"], where
        assert translation.predicted_ids == recorded["predicted_ids"], where
        torch.testing.assert_close(torch.tensor(translation.token_probs), torch.tensor(recorded["token_probs"]),
                                   atol=1e-5, rtol=0, msg=where)
        torch.testing.assert_close(translation.cross_attention[-1].mean(0),
                                   torch.tensor(recorded["cross_last_layer_mean"]), atol=1e-5, rtol=0, msg=where)
        torch.testing.assert_close(translation.encoder_attention[0].mean(0),
                                   torch.tensor(recorded["encoder_first_layer_mean"]), atol=1e-5, rtol=0, msg=where)
