"""Small helpers shared by the test modules."""

import contextlib
import dataclasses
import importlib
import io
import logging
import socket
import subprocess
import sys
import time
import traceback


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_on_loopback(demo, **options) -> None:
    """``demo`` served in this process on loopback, on the first free port from Gradio's 7860 on: Gradio tries
    each in turn, where a port picked before launching could be taken before it is bound (by another worker, or by
    an outgoing connection: the kernel hands out the same range for those)."""
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **options)


def calls_ended(client, *jobs, timeout: float = 120) -> None:
    """Wait until ``jobs`` have ended and ``client``'s stream has closed after them, before its session's next call.

    gradio_client reads all of a session's events from one stream, which the server closes once the session's last
    event has ended. A call posted after that end, but before the client has read the close, joins the closing
    stream and is lost: it raises ``concurrent.futures.CancelledError`` (tests/app/test_client_sessions.py forces
    it). A job that ends while the test asks something else (a training job that was told to stop) is the same."""
    for job in jobs:
        job.result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while client.stream_open:
        if time.monotonic() > deadline:
            raise TimeoutError(f"gradio_client's stream stayed open {timeout} s after its last event ended")
        time.sleep(0.01)


def run_command(module: str, *args: str, stdin: str | bytes = "") -> subprocess.CompletedProcess:
    """``python -m module args`` run in this process, as a new process would run it: what it reads on stdin,
    logging not yet set up, an exception that escapes printed as Python prints it (exit status 1).

    A second Python costs 3-4 s of importing torch on a 2-core machine, more than most commands take; the tests
    that start the real ``python -m`` keep one command each."""
    main = importlib.import_module(module).main
    data = stdin.encode() if isinstance(stdin, str) else stdin
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []  # so the command's logging.basicConfig writes to its own stderr, as in a new process
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args)) or 0
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
                if not isinstance(exit.code, int | None):
                    print(exit.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - printed as the interpreter prints it, and the status it exits with
                traceback.print_exc()
                code = 1
    finally:
        sys.stdin = saved_stdin
        root.handlers = handlers
        root.setLevel(level)
    return subprocess.CompletedProcess(["python", "-m", module, *args], code, out.getvalue(), err.getvalue())


class QuickTrainer:
    """Stands in for ``transformer.train.trainer.Trainer`` where a Train-tab test is about the tab, not about training.

    Called as the Trainer is, it reports its updates and evaluations at once (100 ms apart: a 40-update job
    streams a few progress reports, and a stop can land mid-run), honours the cancel event and the update count, and leaves the bundled
    reverse-tiny model to publish. Its scores say so: they are made up, not measured.
    """

    UPDATE_S = 0.1

    def __init__(self, config, on_step=None, on_eval=None, cancel=None, show_progress=False):
        from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint

        reverse = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")
        self.model, self.source_tokenizer, self.target_tokenizer = (reverse.model, reverse.source_tokenizer,
                                                                    reverse.target_tokenizer)
        self._info = reverse.info
        if config.preset == "auto":  # planned as the Trainer plans: the plan, not the request, sets the updates
            config = dataclasses.replace(config, preset="tiny", plan="auto", steps=40)
        self.config, self.on_step, self.on_eval, self.cancel = config, on_step, on_eval, cancel
        self.step, self.budget_plan = 0, None

    def info(self) -> dict:
        return {**self._info, "step": self.step}

    def probe(self) -> dict:
        from transformer.paper.translation import forced_decode

        source = self.config.probe_sentences[0]
        target = " ".join(reversed(source.split()))
        probe = forced_decode(self.model, self.source_tokenizer, self.target_tokenizer, source, target)
        return {"step": self.step, "source_tokens": probe.source_pieces, "target_tokens": probe.predicted_pieces,
                "translation": probe.text, "cross": probe.cross_attention.tolist()}

    def run(self) -> dict:
        import time

        every = max(1, self.config.steps // 4)
        stopped_by = None
        while self.step < self.config.steps:
            if self.cancel is not None and self.cancel.is_set():
                stopped_by = "cancel"
                break
            time.sleep(self.UPDATE_S)
            self.step += 1
            if self.on_step:
                self.on_step({"step": self.step, "loss": 3.0 / self.step, "lr": 1e-3, "tokens": 100, "tokens_per_s": 1000.0,
                              "elapsed_s": self.step * self.UPDATE_S})
            if self.on_eval and self.step % every == 0:
                self.on_eval({"step": self.step, "val_loss": 1.0 / self.step, "bleu": 50.0, "exact_match": 0.5,
                              "probe": self.probe()})
        return {"step": self.step, "bleu": 50.0, "exact_match": 0.5, "stopped_by": stopped_by}


def passes_of_both(model, reference, sources: list[list[int]], lowest_id: int) -> tuple:
    """One teacher-forced pass of our converted ``model`` and of transformers' ``reference`` on the same padded
    ``sources`` and 9 random target ids from ``lowest_id``, every attention map returned: (ours, theirs, the
    padded sources)."""
    import torch

    from transformer.paper.decoding import pad_batch

    src = pad_batch(sources, model.config.pad_id)
    tgt = torch.randint(lowest_id, model.config.tgt_vocab_size - 1, (len(sources), 9),
                        generator=torch.Generator().manual_seed(0))
    tgt[:, 0] = model.config.start_id
    with torch.no_grad():
        theirs = reference(input_ids=src, attention_mask=src != model.config.pad_id, decoder_input_ids=tgt,
                           output_attentions=True)
        ours = model(src, tgt, need_weights=True)
    return ours, theirs, src


def assert_same_pass(ours, theirs, encoder_queries=None) -> None:
    """Logits and every attention map of both passes within 1e-5; ``encoder_queries`` (a mask broadcast over the
    encoder's maps) leaves the other encoder rows out of the comparison."""
    import torch

    torch.testing.assert_close(ours.logits, theirs.logits, atol=1e-5, rtol=0)
    for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        for layer, (mine, other) in enumerate(zip(getattr(ours, kind), getattr(theirs, kind), strict=True)):
            if kind == "encoder_attentions" and encoder_queries is not None:
                mine, other = mine * encoder_queries, other * encoder_queries
            torch.testing.assert_close(mine, other, atol=1e-5, rtol=0, msg=f"{kind} layer {layer}")


def panel_size(panel: dict) -> tuple[int, int, int, int]:
    """A grid's panel as its meta names it (ui/drawing/frames.py, grid_panel): queries, keys, rows and columns
    apart."""
    return panel["queries"], panel["keys"], panel["rowsApart"], panel["columnsApart"]


def panels_drawn(trace) -> int:
    """How many maps a heatmap trace draws: one, or a grid's panels (its meta names their size and spacing:
    ui/drawing/frames.py, grid_panel)."""
    grid = (trace.meta if not isinstance(trace, dict) else trace.get("meta")) or {}
    z = trace.z if not isinstance(trace, dict) else trace["z"]
    if not isinstance(grid, dict) or "panel" not in grid:
        return 1
    queries, keys, rows_apart, columns_apart = panel_size(grid["panel"])
    return (len(z) + rows_apart) // (queries + rows_apart) * ((len(z[0]) + columns_apart) // (keys + columns_apart))


def with_corpus_runs(manager, corpus_runs):
    """A ``JobManager`` whose Corpus tab's runs are in the test run's shared folder (``corpus_runs``), the rest of
    its runs its own."""
    from ui.views.corpus import FOLDER
    (manager.runs_dir / FOLDER).symlink_to(corpus_runs, target_is_directory=True)
    return manager
