"""The Train tab's views of a job: its status line, progress bar and live curves."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ..drawing import charts
from ..training.jobs import JobState, time_left_text
from ..runtime.language import ENGLISH, Number, message, percent, said, text


def job_status_markdown(job: JobState | None, language: str = ENGLISH) -> str:
    """A line or two on the current job: progress, time left, outcome."""
    if job is None:
        return text(language, "train.no_job")
    status = message(f"train.status.{job.status}")
    line = (text(language, "train.job_line_of", name=job.name, status=status, step=job.step, total=job.total_steps)
            if job.total_steps else text(language, "train.job_line", name=job.name, status=status, step=job.step))
    left = job.seconds_left()
    if left is not None:
        line += f", {said(time_left_text(left), language)}"
    if job.evals:
        last = job.evals[-1]
        line += text(language, "train.job_scores", loss=Number(last["val_loss"], ".3f"),
                     bleu=Number(last["bleu"], ".1f"))
        if "exact_match" in last:
            line += text(language, "train.job_exact_match", share=percent(last["exact_match"]))
    if job.plan:  # what it planned (training_plans.plan_words)
        line += text(language, "train.job_plan", plan=job.plan)
    if job.said is not None:
        line += f"\n\n{said(job.said, language)}"
    return line


def waiting_markdown(place: int, wait_s: float, language: str = ENGLISH) -> str:
    """What a visitor waiting for the training slot reads: their place, and when their job starts at the latest."""
    others = message("train.waiting.one_other") if place == 2 else message("train.waiting.others", count=place - 1)
    ahead = (message("train.waiting.ahead_job") if place == 1 else
             message("train.waiting.ahead_all", others=others))
    minutes = math.ceil(wait_s / 60)
    when = (message("train.waiting.within_a_minute") if minutes <= 1 else
            message("train.waiting.within_minutes", minutes=minutes))
    return text(language, "train.waiting", place=place, ahead=ahead, when=when)


def job_progress(job: JobState | None) -> float:
    return 0.0 if job is None else job.progress()


def job_curves(job: JobState | None, language: str = ENGLISH) -> go.Figure | None:
    """The job's curves; None (an empty plot) before its first update, rather than axes around nothing."""
    steps = job.steps if job else []
    if not steps:
        return None
    # Thin out long step lists: the curve needs a few hundred points at most.
    stride = max(1, len(steps) // 300)
    running = job.status == "running"
    return charts.training_curves(steps[::stride] + steps[-1:], job.evals,
                                   title=text(language, "train.curves_live" if running else "model.training"),
                                   language=language)


def progress_html(job: JobState | None, language: str = ENGLISH) -> str:
    """A progress bar with its percentage (the browser's own, so it needs no script)."""
    shown = round(100 * job_progress(job))
    return (f'<div style="display:flex;gap:.6em;align-items:center"><progress value="{shown}" max="100" '
            f'style="width:100%;height:1.2em"></progress><span>{said(percent(shown / 100), language)}</span></div>')
