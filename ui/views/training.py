"""The Train tab's views of a job: its status line, progress bar and live curves."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from .. import figures
from ..jobs import JobState, time_left_text


def job_status_markdown(job: JobState | None) -> str:
    """A line or two on the current job: progress, time left, outcome."""
    if job is None:
        return "No training job has run on this server yet."
    line = f"**{job.name}**: {job.status}, update {job.step}" + (f" of {job.total_steps}" if job.total_steps else "")
    left = job.seconds_left()
    if left is not None:
        line += f", {time_left_text(left)}"
    if job.evals:
        last = job.evals[-1]
        line += f" · validation loss {last['val_loss']:.3f}, BLEU {last['bleu']:.1f}"
        if "exact_match" in last:
            line += f", exact match {last['exact_match']:.0%}"
    if job.plan:
        line += f"\n\nPlanned for this machine: {job.plan}."
    if job.message:
        line += f"\n\n{job.message}"
    return line


def waiting_markdown(place: int, wait_s: float) -> str:
    """What a visitor waiting for the training slot reads: their place, and when their job starts at the latest."""
    others = "the visitor" if place == 2 else f"the {place - 1} visitors"
    ahead = "the job running now has" if place == 1 else f"the job running now and {others} ahead of you have"
    minutes = math.ceil(wait_s / 60)
    when = "within a minute" if minutes <= 1 else f"within {minutes} minutes"
    return (f"**Waiting for the training slot**: you are number {place} in line. Your job starts by itself when "
            f"{ahead} finished, {when}. Keep this page open: closing it gives up your place.")


def job_progress(job: JobState | None) -> float:
    return 0.0 if job is None else job.progress()


def job_curves(job: JobState | None) -> go.Figure | None:
    """The job's curves; None (an empty plot) before its first update, rather than axes around nothing."""
    steps = job.steps if job else []
    if not steps:
        return None
    # Thin out long step lists: the curve needs a few hundred points at most.
    stride = max(1, len(steps) // 300)
    running = job.status == "running"
    return figures.training_curves(steps[::stride] + steps[-1:], job.evals,
                                   title="Training, live" if running else "Training")


def progress_html(job: JobState | None) -> str:
    """A progress bar with its percentage (the browser's own, so it needs no script)."""
    percent = round(100 * job_progress(job))
    return (f'<div style="display:flex;gap:.6em;align-items:center"><progress value="{percent}" max="100" '
            f'style="width:100%;height:1.2em"></progress><span>{percent}%</span></div>')
