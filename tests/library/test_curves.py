"""A model card's training curves: an SVG document drawn by the library alone, one line per recorded series."""

from xml.etree import ElementTree

from transformer.files.curves import training_curves_svg

SVG = "{http://www.w3.org/2000/svg}"
STEPS = [{"step": s, "loss": 5 - s / 100, "lr": 1e-3 * min(1, s / 50), "elapsed_s": s} for s in range(1, 201, 10)]
EVALS = [{"step": s, "val_loss": 4 - s / 200, "bleu": s / 10} for s in (50, 100, 150, 200)]


def drawn(steps, evals, title="run"):
    return ElementTree.fromstring(training_curves_svg(steps, evals, title))


def texts(svg) -> list[str]:
    return [element.text for element in svg.iter(f"{SVG}text")]


def test_three_panels_with_a_line_per_series_and_its_name_in_the_legend():
    svg = drawn(STEPS, EVALS)
    assert {"loss (nats/token)", "learning rate", "validation score"} <= set(texts(svg))
    assert {"train loss (smoothed labels)", "validation loss", "learning rate", "val BLEU (greedy)"} <= set(texts(svg))
    assert len(svg.findall(f"{SVG}polyline")) == 4


def test_a_line_runs_left_to_right_and_rises_where_its_values_rise():
    svg = drawn([], EVALS)
    validation_loss, bleu = svg.findall(f"{SVG}polyline")
    points = [tuple(map(float, point.split(","))) for point in bleu.get("points").split()]
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    assert [y for _, y in points] == sorted((y for _, y in points), reverse=True)  # SVG's y grows downwards


def test_axis_ends_are_labelled_with_the_values_they_stand_for():
    labels = texts(drawn([], EVALS))
    assert {"50", "200", "5", "20"} <= set(labels)


def test_a_run_with_nothing_recorded_still_draws_and_a_title_is_escaped():
    svg = drawn([], [], title="<run> & co")
    assert "<run> & co" in texts(svg) and texts(svg).count("nothing recorded") == 3
