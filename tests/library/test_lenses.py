"""What each layer knows: DecoderLens reads an encoder layer as the decoder run by hand on that layer's states,
the tuned lens starts as the logit lens and learns to be closer to the final layer, and its KL is its definition
(the float64 references of paper_reference.py, which share no code with the library)."""

import copy
import json

import pytest
import torch
from safetensors.torch import save_file

from helpers import run_command
from paper_reference import Reference, tuned_lens as reference_lens
from test_references import SOURCE, TARGET, Ids, close, tiny_model
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, load_checkpoint
from transformer.inside import decoder_lens, one_head, tuned_lens
from transformer.inside.corpus_run import model_fingerprint
from transformer.paper.decoding import greedy_search, never_generate
from transformer.paper.model import HeadMask
from transformer.paper.translation import forced_decode, translate

SENTENCES = ["A dog runs across the grass.", "Two children play football in a park.",
             "A man in a red shirt is cooking dinner.", "The woman reads a book on the train.",
             "A cat sleeps on a warm windowsill.", "Three people walk along the beach at sunset.",
             "A boy jumps into the swimming pool.", "An old man sits on a bench and feeds pigeons.",
             "A girl with a blue hat rides her bicycle.", "Workers repair the road in the rain.",
             "A musician plays the guitar on the street.", "Two dogs chase each other through the snow."]
HELD_OUT = ["A young woman is painting a picture.", "The children are laughing at the clown.",
            "A man climbs a steep rock wall.", "People are waiting for the bus."]


@pytest.fixture(scope="module", params=[False, True], ids=["post-norm", "pre-norm"])
def tiny(request):
    return tiny_model(request.param)


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


# --- DecoderLens ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layer", [1, 2])
def test_decoderlens_is_the_decoder_run_on_that_encoder_layers_states(tiny, layer):
    """Logits and every map of a teacher-forced pass reading encoder layer k equal the reference's, which feeds the
    decoder layer k's output (through the encoder's final norm where the model has one)."""
    lens = decoder_lens.read_at_layer(tiny, layer)
    translation = forced_decode(lens, Ids(), Ids(), SOURCE, TARGET)
    run = Reference(tiny).run(translation.source_ids, translation.target_ids, read_encoder_layer=layer)
    probabilities = run.logits.softmax(-1)
    close(torch.tensor(translation.token_probs),
          torch.stack([probabilities[t, token] for t, token in enumerate(translation.predicted_ids)]))
    assert translation.encoder_attention.size(0) == layer
    for kind, maps in (("encoder", translation.encoder_attention), ("decoder", translation.decoder_attention),
                       ("cross", translation.cross_attention)):
        for number, block in enumerate(run.blocks[kind][:len(maps)]):
            close(maps[number], block.weights)


def test_decoderlens_searches_each_token_as_the_argmax_of_the_decoder_on_that_layer(tiny):
    lens = decoder_lens.read_at_layer(tiny, 1)
    (tokens,) = greedy_search(lens, torch.tensor([SOURCE]), max_length=8)
    run = Reference(tiny).run(SOURCE, [tiny.config.start_id] + tokens, read_encoder_layer=1)
    chosen = never_generate(tiny, run.logits.float()).argmax(-1).tolist()
    assert tokens == chosen[:len(tokens)]
    layer_two = Reference(tiny).run(SOURCE, [tiny.config.start_id] + tokens, read_encoder_layer=2)
    assert not torch.allclose(layer_two.logits, run.logits)  # the layers differ, so the test could fail


def test_at_the_last_layer_a_head_mask_switches_off_the_same_encoder_heads_as_in_the_model_itself(tiny):
    mask = HeadMask(encoder=torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    lens = forced_decode(decoder_lens.read_at_layer(tiny, 2), Ids(), Ids(), SOURCE, TARGET, head_mask=mask)
    model = forced_decode(tiny, Ids(), Ids(), SOURCE, TARGET, head_mask=mask)
    assert lens.token_probs == pytest.approx(model.token_probs, abs=1e-6)
    assert lens.token_probs != pytest.approx(forced_decode(tiny, Ids(), Ids(), SOURCE, TARGET).token_probs, abs=1e-4)


def test_a_batch_reading_one_layer_per_sentence_names_a_layer_for_each(tiny):
    with pytest.raises(ValueError, match="2 layers to read for a batch of 1 sentences"):
        forced_decode(decoder_lens.read_at_layer(tiny, [1, 2]), Ids(), Ids(), SOURCE, TARGET)


def test_the_model_is_left_as_it_was_and_its_weights_are_shared(tiny):
    encoder = tiny.encoder
    lens = decoder_lens.read_at_layer(tiny, 1)
    assert tiny.encoder is encoder and len(tiny.encoder.layers) == 2
    assert lens.encoder.layers[0] is tiny.encoder.layers[0] and lens.decoder is tiny.decoder


def test_an_encoder_layer_the_model_does_not_have_is_refused(tiny):
    for layer in (0, 3):
        with pytest.raises(ValueError, match="the encoder has 2"):
            decoder_lens.read_at_layer(tiny, layer)


def test_every_layer_read_at_once_equals_each_layer_read_alone(bundled):
    together = decoder_lens.translations_by_layer(bundled, SENTENCES[2], beam_size=5)
    for layer, translation in enumerate(together, start=1):
        (alone,) = decoder_lens.translate_from_layer(bundled, [SENTENCES[2]], layer, beam_size=5)
        assert translation.predicted_ids == alone.predicted_ids
        torch.testing.assert_close(translation.cross_attention, alone.cross_attention, atol=1e-5, rtol=0)
        assert translation.encoder_attention.size(0) == layer


@pytest.mark.parametrize("beam", [1, 5])
def test_at_the_last_encoder_layer_it_is_the_ordinary_translation_token_for_token_and_map_for_map(bundled, beam):
    for sentence in SENTENCES[:4]:
        last = decoder_lens.translations_by_layer(bundled, sentence, beam_size=beam)[-1]
        ordinary = bundled.translate(sentence, beam)
        assert last.predicted_ids == ordinary.predicted_ids and last.text == ordinary.text
        for name in ("encoder_attention", "decoder_attention", "cross_attention"):
            torch.testing.assert_close(getattr(last, name), getattr(ordinary, name), atol=1e-5, rtol=0)
    texts = decoder_lens.texts_from_layer(bundled, SENTENCES, 3, beam_size=beam)
    assert texts == [bundled.translate(sentence, beam).text for sentence in SENTENCES]


def test_every_layer_is_read_within_the_length_asked_for(bundled):
    for translation in decoder_lens.translations_by_layer(bundled, SENTENCES[7], beam_size=5, max_length=3):
        assert len(translation.predicted_ids) == 3 and not translation.ended
    (alone,) = decoder_lens.translate_from_layer(bundled, [SENTENCES[7]], 1, beam_size=5, max_length=3)
    assert len(alone.predicted_ids) == 3 and alone.encoder_attention.size(0) == 1


# --- the tuned lens ----------------------------------------------------------------------------------------------

def test_a_lens_reads_as_many_layers_as_it_has_maps_and_one_more(bundled):
    lens = tuned_lens.TunedLens.identity(bundled)
    assert lens.model == model_fingerprint(bundled) and lens.layers == 3
    with pytest.raises(ValueError, match="the lens has 3 layers, the states 2"):
        lens.translated(torch.zeros(2, 4, 256))


def test_the_untrained_tuned_lens_is_the_logit_lens_exactly(bundled):
    translation = translate(bundled.model, bundled.source_tokenizer, bundled.target_tokenizer, SENTENCES[0])
    logit = one_head.logit_lens(bundled.model, translation)
    tuned = one_head.logit_lens(bundled.model, translation, lens=tuned_lens.TunedLens.identity(bundled))
    assert torch.equal(logit.probabilities, tuned.probabilities) and torch.equal(logit.kl, tuned.kl)
    assert torch.equal(logit.top_ids, tuned.top_ids)


def random_lens(model) -> tuned_lens.TunedLens:
    torch.manual_seed(5)
    lens = tuned_lens.TunedLens(model.config.d_model, model.config.n_decoder_layers)
    with torch.no_grad():
        for parameter in lens.parameters():
            parameter.copy_(0.3 * torch.randn_like(parameter))
    return lens


def test_each_layers_kl_is_its_definition_recomputed_in_float64(tiny):
    """KL(p_final ‖ p_layer) of the logit lens and of a lens with non-trivial maps, per layer, averaged over the
    steps, in the logit-lens reading and in the comparison the command prints; top-1 agreement likewise."""
    lens = random_lens(tiny)
    translation = forced_decode(tiny, Ids(), Ids(), SOURCE, TARGET)
    run = Reference(tiny).run(translation.source_ids, translation.target_ids)
    expected_logit, expected_tuned = reference_lens(Reference(tiny), run,
                                                    [(m.weight.detach(), m.bias.detach()) for m in lens.maps])
    close(one_head.logit_lens(tiny, translation).kl, expected_logit.mean(-1))
    close(one_head.logit_lens(tiny, translation, lens=lens).kl, expected_tuned.mean(-1))
    assert abs(float(expected_tuned[0].mean() - expected_logit[0].mean())) > 1e-3  # the maps change the reading
    states = one_head.decoder_states(tiny, torch.tensor([translation.source_ids]),
                                     torch.tensor([translation.target_ids]))[:, 0]
    compared = tuned_lens.compare_lenses(Checkpoint(tiny, Ids(), Ids()), lens, states, chunk=2)
    close(torch.tensor(compared.kl_logit), expected_logit.mean(-1))
    close(torch.tensor(compared.kl_tuned), expected_tuned.mean(-1))
    final = run.logits.argmax(-1)
    for layer, hidden in enumerate(run.decoder_layers):
        read = Reference(tiny).project(Reference(tiny).final("decoder", hidden)).argmax(-1)
        assert compared.top1_logit[layer] == pytest.approx(float((read == final).double().mean()))
    assert compared.positions == len(translation.target_ids)
    assert compared.rows() == [{"decoder_layer": layer, "kl_logit": round(compared.kl_logit[layer - 1], 6),
                                "kl_tuned": round(compared.kl_tuned[layer - 1], 6),
                                "top1_logit": round(compared.top1_logit[layer - 1], 6),
                                "top1_tuned": round(compared.top1_tuned[layer - 1], 6)} for layer in (1, 2, 3)]


def test_a_lens_reads_and_trains_on_a_model_kept_in_bfloat16(tiny):
    """The app keeps the large multilingual models in bfloat16 (pre-norm, with a final norm)."""
    half = copy.deepcopy(tiny).to(torch.bfloat16)
    lens = random_lens(tiny)
    translation = forced_decode(half, Ids(), Ids(), SOURCE, TARGET)
    reading = one_head.logit_lens(half, translation, lens=lens)
    close(reading.kl, one_head.logit_lens(tiny, translation, lens=lens).kl.double(), atol=0.1, rtol=0.1)
    states = one_head.decoder_states(half, torch.tensor([SOURCE]), torch.tensor([translation.target_ids]))[:, 0]
    steps = tuned_lens.fit(Checkpoint(half, Ids(), Ids()), tuned_lens.TunedLens(8, 3),
                           tuned_lens.Positions(states.clone(), 1), tuned_lens.LensTraining(steps=3, batch_positions=4))
    assert steps == 3


def test_training_brings_every_layer_but_the_last_closer_to_the_final_one_and_leaves_the_model_alone(bundled):
    before = {name: tensor.clone() for name, tensor in bundled.model.state_dict().items()}
    training = tuned_lens.LensTraining(sentences=len(SENTENCES), steps=40, batch_positions=128, learning_rate=5e-4)
    heard = []
    lens = tuned_lens.train_lens(bundled, SENTENCES, "the tests' sentences", training,
                                 progress=lambda stage, done, total: heard.append((stage, done, total)))
    assert lens.trained_on["input"] == "the tests' sentences" and lens.trained_on["sentences"] == len(SENTENCES)
    assert set(lens.trained_on) == {"input", "sentences", "positions", "steps", "seconds"}
    assert lens.trained_on["positions"] == tuned_lens.collect_positions(bundled, SENTENCES).count
    assert 0 < lens.trained_on["seconds"] < 600 and lens.belongs_to(bundled)
    assert lens.trained_on["steps"] == 40 and ("training", 40, 40) in heard and heard[0][0] == "translating"
    held_out = tuned_lens.collect_positions(bundled, HELD_OUT)
    compared = tuned_lens.compare_lenses(bundled, lens, held_out.states)
    for layer in range(bundled.model.config.n_decoder_layers - 1):  # trained towards the last layer, not another
        assert compared.kl_tuned[layer] < 0.8 * compared.kl_logit[layer], layer
    assert compared.kl_tuned[-1] == compared.kl_logit[-1] == 0
    for name, tensor in bundled.model.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    assert all(parameter.grad is None for parameter in bundled.model.parameters())


def test_a_stopped_training_keeps_what_it_learnt(bundled):
    steps = []
    lens = tuned_lens.train_lens(bundled, SENTENCES[:4], "four", tuned_lens.LensTraining(steps=50),
                                 progress=lambda stage, done, total: steps.append(done) if stage == "training"
                                 else None, should_stop=lambda: len(steps) >= 2)
    assert lens.trained_on["steps"] == 20


def test_a_training_stopped_before_it_read_a_sentence_says_so_and_one_without_sentences_too(bundled):
    with pytest.raises(tuned_lens.InputError, match="stopped before it had read a sentence"):
        tuned_lens.train_lens(bundled, SENTENCES, "the tests' sentences", should_stop=lambda: True)
    with pytest.raises(tuned_lens.InputError, match="no sentences to train"):
        tuned_lens.train_lens(bundled, ["  "], "blank")


def test_a_lens_is_saved_with_what_it_belongs_to_and_refused_for_other_weights(bundled, tmp_path):
    lens = random_lens(bundled.model)
    lens.model, lens.trained_on = model_fingerprint(bundled), {"input": "multi30k:train", "sentences": 3}
    lens.save(tmp_path / tuned_lens.LENS_FILE)
    loaded = tuned_lens.shipped_lens(bundled, tmp_path)
    assert loaded.trained_on == lens.trained_on and loaded.belongs_to(bundled) and loaded.model == lens.model
    assert loaded.layers == 3 and loaded.maps[0].in_features == 256
    for mine, theirs in zip(lens.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(mine, theirs)
    other = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-fr", device="cpu")
    assert tuned_lens.shipped_lens(other, tmp_path) is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / tuned_lens.LENS_FILE).write_bytes(b"not safetensors")
    with pytest.raises(tuned_lens.InputError, match="broken"):
        tuned_lens.shipped_lens(bundled, tmp_path / "broken")
    (tmp_path / "weights").mkdir()
    save_file({"w": torch.zeros(1)}, str(tmp_path / "weights" / tuned_lens.LENS_FILE))
    with pytest.raises(tuned_lens.InputError, match=r"is not a tuned lens this version can read \(not a tuned lens\)"):
        tuned_lens.shipped_lens(bundled, tmp_path / "weights")
    narrower = tuned_lens.TunedLens(128, 3, model_fingerprint(bundled))
    assert not narrower.belongs_to(bundled), "the same fingerprint, another width"


@pytest.mark.parametrize("name", ["multi30k-en-de", "multi30k-en-fr"])
def test_the_bundled_models_ship_lenses_trained_on_their_own_training_sentences_for_their_weights(name):
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / name, device="cpu")
    lens = tuned_lens.shipped_lens(checkpoint)
    assert lens is not None and lens.belongs_to(checkpoint)
    assert lens.trained_on["input"] == "multi30k:train" and lens.trained_on["sentences"] >= 1000


# --- the command ---------------------------------------------------------------------------------------------

def test_the_command_reads_every_layer_scored_against_references(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{sentence}\tEin Satz.\n" for sentence in SENTENCES[:4]))
    result = run_command("transformer.lens", "--input", str(pairs), "--json", "--beam", "1")
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout)
    assert [row["encoder_layer"] for row in read["decoderlens"]] == [1, 2, 3]
    assert all(row["sentences"] == 4 and row["bleu_signature"].startswith("nrefs:1") for row in read["decoderlens"])
    assert [row["decoder_layer"] for row in read["lens"]] == [1, 2, 3]
    assert read["references"] == str(pairs) and read["lens_trained_on"]["input"] == "multi30k:train"
    assert all(row["kl_tuned"] < row["kl_logit"] for row in read["lens"][:-1])
    assert read["lens"][-1]["kl_logit"] == 0 and read["lens"][-1]["top1_tuned"] == 1
    assert read["sentences"] == 4 and read["positions"] > 4 and read["seconds"] > 0


def test_input_without_references_is_scored_against_the_final_translation_and_says_so(tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES[:3]) + "\n")
    result = run_command("transformer.lens", "--input", str(sentences), "--json", "--beam", "1")
    read = json.loads(result.stdout)
    assert read["references"] == "final translation"
    assert read["decoderlens"][-1]["chrf"] == 100 and read["decoderlens"][-1]["bleu"] == 100


def test_the_lens_is_never_compared_on_its_own_training_sentences():
    result = run_command("transformer.lens", "--input", "multi30k:train")
    assert result.returncode == 2
    assert result.stderr.startswith("error [lens.overlap]: The tuned lens was trained on multi30k:train")


def test_a_model_not_trained_on_multi30k_is_asked_what_to_train_its_lens_on(tmp_path):
    sentences = tmp_path / "digits.txt"
    sentences.write_text("1 2 3\n")
    result = run_command("transformer.lens", "--checkpoint", str(REPOSITORY_CHECKPOINTS / "reverse-tiny"),
                         "--input", str(sentences))
    assert result.returncode == 2 and result.stderr.startswith("error [lens.no_training_input]: reverse-tiny")
