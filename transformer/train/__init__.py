"""Training, in parts: the loop (``trainer.Trainer``), its settings (``settings.TrainConfig``) and how they are
chosen for a run, by the command line and the app alike (``planning``), the corpus made into batches (``corpus``),
the loss (``loss``), honest scores (``evaluation``), the run's directory of saves, logs and resumable state
(``run_directory``), its logs read back (``run_logs``), its clock and time limit (``clock``), a run fitted to a time budget (``budget``: the plan; ``calibrate``: this machine's measured
speed), several processes (``processes``), and the command line (``cli``, run as ``python -m transformer.train``).

Nothing is imported here, so that a command may use one part (``python -m transformer.evaluate`` uses evaluation,
which uses the loss) without loading the loop.
"""
