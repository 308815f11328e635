"""Looking inside a model: one head's arithmetic and the logit lens, attributions, interventions on heads, and
statistics over many sentences."""
