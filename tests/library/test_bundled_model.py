"""The bundled English→German and English→French models: present, small enough for a Space, sensible, and honestly
scored."""

import functools
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.paper.sentences import translate_batch
from transformer.paper.reference import to_torch_transformer

ROOT = Path(__file__).resolve().parents[2]

# Written for this project, not taken from Multi30K; each with words any sensible translation contains. The bars
# are the test BLEU (beam 5) each model was asked to reach.
TRANSLATORS = {
    "multi30k-en-de": dict(bar=38.0, words={
        "A dog is running through the snow.": ["Hund", "Schnee"],
        "Two children are playing football on the beach.": ["Kinder", "Strand"],
        "A woman is reading a book in the park.": ["Frau", "Buch"],
        "An old man is sitting on a bench.": ["Mann", "Bank"]}),
    "multi30k-en-fr": dict(bar=56.0, words={
        "A dog is running through the snow.": ["chien", "neige"],
        "Two children are playing football on the beach.": ["enfants", "plage"],
        "A woman is reading a book in the park.": ["femme", "livre"],
        "An old man is sitting on a bench.": ["homme", "banc"]}),
}


@functools.cache
def bundled(name: str):
    return load_checkpoint(REPOSITORY_CHECKPOINTS / name, device="cpu")


def card_metrics(name: str) -> dict:
    return json.loads((REPOSITORY_CHECKPOINTS / name / "metrics.json").read_text())


@pytest.fixture(scope="module")
def model():
    return bundled("multi30k-en-de")


@pytest.mark.parametrize("name", TRANSLATORS)
def test_bundled_model_translates_sentences_it_never_saw(name):
    model, words = bundled(name), TRANSLATORS[name]["words"]
    outputs = translate_batch(model.model, model.source_tokenizer, model.target_tokenizer, list(words), beam_size=5)
    for (sentence, expected), output in zip(words.items(), outputs):
        for word in expected:
            assert word in output, f"{name}: {sentence!r} -> {output!r} lacks {word!r}"


def test_every_bundled_file_fits_a_space_without_git_lfs():
    for path in REPOSITORY_CHECKPOINTS.rglob("*"):
        if path.is_file():
            assert path.stat().st_size < 10 * 1024 * 1024, f"{path} is over 10 MB"


@pytest.mark.parametrize("name", TRANSLATORS)
def test_model_card_states_scores_with_signatures_and_meets_the_bar(name):
    metrics, card = card_metrics(name), (REPOSITORY_CHECKPOINTS / name / "README.md").read_text()
    assert metrics["test_bleu"] >= TRANSLATORS[name]["bar"] and metrics["beam"] == 5
    assert "tok:13a" in metrics["bleu_signature"] and "case:mixed" in metrics["bleu_signature"]
    for needle in ("python -m transformer.train", "sha256", "Hardware", "minutes", "test_2016_flickr",
                   metrics["bleu_signature"]):
        assert needle.lower() in card.lower(), needle


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MULTI30K_DIR"), reason="MULTI30K_DIR is not set: Multi30K is not available")
@pytest.mark.parametrize("name", TRANSLATORS)
def test_evaluate_reproduces_the_model_cards_test_bleu(name, tmp_path):
    metrics = card_metrics(name)
    result = subprocess.run(
        [sys.executable, "-m", "transformer.evaluate", "--checkpoint", str(REPOSITORY_CHECKPOINTS / name),
         "--split", "test_2016_flickr",
         "--beam", str(metrics["beam"]), "--length-penalty", str(metrics["length_penalty"]), "--json",
         "--output", str(tmp_path / "hypotheses.txt")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    reproduced = json.loads(result.stdout.splitlines()[-1])
    assert reproduced["bleu"] == pytest.approx(metrics["test_bleu"], abs=0.1)
    assert reproduced["signature"] == metrics["bleu_signature"]


def test_the_latency_benchmark_races_decoders_that_produce_the_same_translation(model, monkeypatch):
    """benchmarks/decode_latency.py times our cache against uncached, reference and hand-flattened decoders."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    decode_latency = importlib.import_module("decode_latency")
    src = torch.tensor([model.source_tokenizer.encode("A man in a blue shirt is riding a bike down the street.")])
    cached = decode_latency.decode_cached(model.model, src)
    assert len(set(cached)) > 10  # a real sentence, so a decoder that drifts shows
    assert decode_latency.decode_uncached(model.model, src) == cached
    assert decode_latency.decode_uncached_all_logits(model.model, src) == cached
    reference = to_torch_transformer(model.model).eval()
    assert decode_latency.decode_reference_cached(reference, model.model, src) == cached
    assert decode_latency.decode_reference_cached(reference, model.model, src, need_weights=False) == cached
    assert decode_latency.decode_flattened(model.model, decode_latency.flatten_decoder(model.model), src) == cached
    assert decode_latency.decode_flattened_modules(model.model, src) == cached


def test_the_readme_python_example_runs_and_shows_what_it_says(monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## From Python", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)
    claimed = example.split("result.text", 1)[1].split("\n", 1)[0].split("#", 1)[1].strip().strip("'")
    assert namespace["result"].text == claimed
    assert tuple(namespace["result"].cross_attention.shape[:2]) == (namespace["model"].config.n_decoder_layers,
                                                                     namespace["model"].config.n_heads)
    inside = section.split("```python\n", 2)[2].split("```", 1)[0]  # the next example goes on from this one
    assert "head_arithmetic" in inside
    exec(compile(inside, "README.md", "exec"), namespace)
    arithmetic = namespace["a"]
    assert (arithmetic.kind, arithmetic.layer, arithmetic.head, arithmetic.query) == ("cross", 3, 2, 3)
    assert "</s>" in capsys.readouterr().out, "the step loop printed every token, the end included"


def mean_entropy_per_layer(attention: torch.Tensor) -> list[float]:
    """(layers, heads, queries, keys) attention to each layer's mean entropy over heads and queries, in nats."""
    return (-(attention * attention.clamp_min(1e-12).log()).sum(-1)).mean(dim=(1, 2)).tolist()


def test_the_classroom_tours_claims_about_layers_hold(model):
    """Lessons "Where each word looks" and "Attention aligns": the first layer's cross-attention is the most
    spread out, the last points; the reverse model's layer 2 draws the anti-diagonal."""
    example = model.translate("A young girl is playing with a red ball in the park.", 5)
    entropy = mean_entropy_per_layer(example.cross_attention)
    assert entropy[0] == max(entropy) and entropy[-1] < entropy[0] / 2
    reverse = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")
    digits = reverse.translate("3 1 4 1 5 9 2 6", 5)
    assert digits.text == "6 2 9 5 1 4 1 3"
    layer_2 = digits.cross_attention[1]  # (heads, target, source): the anti-diagonal, every head
    reading = layer_2[:, :8, :8].argmax(-1)  # for each of the 8 digits produced, the source digit most attended
    assert (reading == torch.arange(7, -1, -1)).float().mean() >= 0.75
    assert mean_entropy_per_layer(digits.cross_attention)[0] > mean_entropy_per_layer(digits.cross_attention)[1]

