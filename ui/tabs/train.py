"""The Train tab: train a small model in the browser and watch its loss fall and its attention form."""

from __future__ import annotations

import secrets
import time

import gradio as gr

from transformer.data import SYNTHETIC_TASKS
from transformer.files.checkpoint import Checkpoint

from ..training import jobs as training_jobs
from ..training import training_plans
from ..training.uploads import MAX_UPLOAD_BYTES
from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, Number, message, said, text
from ..runtime.limits import visiting_client
from ..runtime.model_names import checkpoint_name, listed_with
from ..runtime.page import Page
from ..services import Services, multi30k_available
from ..views import training as views
from ..runtime.numbers import finite
from ..views.model import probe_figure

TAB_ID, TITLE = "train", message("train.title")  # the tab's id in the page, and its label
STREAM_EVERY_S = 1.0  # how often the starter's page hears of the job
CLOCK_S = 2.0          # how often another visitor's open Train tab looks at the job
DATA_CHOICES = (*SYNTHETIC_TASKS, "multi30k", "upload")  # Multi30K where it is not on disk says how to add it


def preset_label(name: str, language: str = ENGLISH) -> str:
    """A model size as the page names it ("auto": fitted to the time limit); a size the app does not offer, as it
    was asked for."""
    return text(language, f"train.preset.{name}") if name in training_jobs.APP_PRESETS else str(name)


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    if not page.services.training:
        gr.Markdown(words("train.turned_off", variable=training_jobs.DISABLE_VARIABLE))
        return
    gr.Markdown(words("train.intro"))
    limit_mb = MAX_UPLOAD_BYTES // 10**6
    with gr.Row():
        train_data = components.Radio([(words(f"train.data.{name}"), name) for name in DATA_CHOICES],
                                      value="reverse", label=words("train.data"), info=words("train.data_info"))
        train_upload = gr.File(label=words("train.upload_label", limit=limit_mb), file_types=[".tsv", ".txt"],
                               type="filepath", visible=False)
    with gr.Row():
        train_preset = components.Radio([(preset_label(name, page.language), name)
                                         for name in training_jobs.APP_PRESETS],
                                        value="tiny", label=words("train.model_size"),
                                        info=words("train.model_size_info"))
        train_steps = components.Slider(20, training_jobs.MAX_STEPS, value=400, step=10, label=words("train.updates"),
                                        elem_id="train-steps")
        train_minutes = components.Slider(0.5, training_jobs.MAX_MINUTES, value=3, step=0.5,
                                          label=words("train.minutes"), elem_id="train-minutes")
    preset_info = gr.Markdown(elem_id="preset-info")
    with gr.Row():
        start_button = gr.Button(words("train.start"), variant="primary", elem_id="start-training")
        stop_button = gr.Button(words("train.stop"), elem_id="stop-training")
    train_status = gr.Markdown(elem_id="train-status")
    train_progress = gr.HTML(views.progress_html(None, page.language))
    train_curves = Chart(label=words("train.curves"), elem_id="train-curves")
    gr.Markdown(words("train.attention_forms"))
    replay = components.Slider(1, 2, value=1, step=1, label=words("model.evaluation"), elem_id="replay-slider")
    replay_plot = Chart(label=words("model.probe_attention"), elem_id="replay-plot")
    with gr.Row():
        keep_button = gr.Button(words("train.keep"), visible=False, scale=0, elem_id="keep-model")
        trained_download = gr.DownloadButton(words("train.download"), visible=False, scale=0)
        delete_button = gr.Button(words("train.delete"), visible=False, scale=0, elem_id="delete-model")
    # While this tab is open, a visitor sees the server's job as it runs, whoever started it.
    page.add(train_data=train_data, train_upload=train_upload, train_preset=train_preset, train_steps=train_steps,
             train_minutes=train_minutes, preset_info=preset_info, start_button=start_button,
             stop_button=stop_button, train_status=train_status, train_progress=train_progress,
             train_curves=train_curves, replay=replay, replay_plot=replay_plot, trained_download=trained_download,
             keep_button=keep_button,
             delete_button=delete_button,
             job_clock=gr.Timer(CLOCK_S, active=False), seen_job=gr.State(None))


# --- handlers ------------------------------------------------------------------------------------

PROGRESS = ("train_status", "train_progress", "train_curves")
REPLAY = ("replay", "replay_plot")
JOB_OUTPUTS = (*PROGRESS, *REPLAY, "trained_download", "delete_button", "keep_button")


def visitor(request: gr.Request | None) -> str:
    """Who is asking: their session; a request without one is nobody's, so it can stop no one's job."""
    if request is None or not request.session_hash:
        return f"anonymous-{secrets.token_hex(8)}"
    return request.session_hash


def job_progress(job, language: str = ENGLISH) -> dict:
    return {"train_status": views.job_status_markdown(job, language),
            "train_progress": views.progress_html(job, language), "train_curves": views.job_curves(job, language)}


def job_replay(job, language: str = ENGLISH) -> dict:
    """The evaluation slider on the latest evaluation, and its probe attention."""
    probes = job.probes if job else []
    return {"replay": gr.Slider(1, max(2, len(probes)), value=max(1, len(probes)), step=1,
                                interactive=len(probes) > 1),
            "replay_plot": probe_figure(probes, len(probes), language)}


def job_download(services: Services, job) -> dict:
    finished = job is not None and job.checkpoint is not None
    kept = finished and (services.jobs.published_dir / job.checkpoint).is_dir()
    held = job is not None and job.held is not None and (services.jobs.held_dir / job.held).is_dir()
    return {"trained_download": gr.DownloadButton(value=services.jobs.shelf.archive(job.checkpoint) if kept else None,
                                                  visible=kept),
            "delete_button": gr.Button(visible=kept), "keep_button": gr.Button(visible=held)}


def job_views(services: Services, job, language: str = ENGLISH) -> dict:
    return {**job_progress(job, language), **job_replay(job, language), **job_download(services, job)}


def on_start(services: Services, train_data, train_upload, train_preset, train_steps, train_minutes,
             request: gr.Request, language: str = ENGLISH):
    """Start a job, once the training slot is free and nobody waits ahead (meanwhile the visitor sees their place
    in line), and stream its progress to whoever started it; the model list follows once it is published."""
    job_request = training_jobs.JobRequest(data=train_data, preset=train_preset, steps=train_steps,
                                           minutes=train_minutes, upload=train_upload)
    owner, client = visitor(request), visiting_client(request)
    services.jobs.check(job_request)
    while True:
        place = services.jobs.wait_in_line(job_request, owner, client)
        if place is None:
            try:
                services.jobs.start(job_request, owner=owner, client=client)
                break
            except training_jobs.SlotTaken:  # another visitor took it between the two calls
                continue
        yield {"train_status": views.waiting_markdown(place, services.jobs.expected_wait_s(place), language)}
        time.sleep(STREAM_EVERY_S)
    while True:
        job = services.jobs.job_of(owner)  # this visitor's job, even once a waiting visitor's has the slot
        finished = job.status != "running"
        yield {**job_views(services, job, language),
               **({"model": gr.Dropdown(choices=services.registry.names())} if finished else {})}
        if finished:
            return
        time.sleep(STREAM_EVERY_S)


def on_stop(services: Services, request: gr.Request, language: str = ENGLISH) -> dict:
    gr.Info(services.jobs.stop(owner=visitor(request), language=language))
    return {}


def on_keep(services: Services, request: gr.Request, language: str = ENGLISH) -> dict:
    """A stopped job's model, added to everyone's model list by the visitor who trained it."""
    gr.Info(services.jobs.keep(owner=visitor(request), language=language))
    job = services.jobs.job_of(visitor(request)) or services.jobs.current
    return {**job_views(services, job, language), "model": gr.Dropdown(choices=services.registry.names())}


def on_delete(services: Services, model, request: gr.Request, language: str = ENGLISH) -> dict:
    """The last job's model, deleted by the visitor who trained it; the model list follows at once."""
    job = services.jobs.job_of(visitor(request)) or services.jobs.current
    if job is None or job.checkpoint is None:
        raise training_jobs.JobError(message("train.error.nothing_to_delete"))
    gr.Info(services.jobs.shelf.delete(job.checkpoint, owner=visitor(request), language=language))
    services.registry.forget(job.checkpoint)
    names = services.registry.names()
    kept = model if checkpoint_name(model or "") in names else services.registry.default_name()
    return {**job_download(services, job), "model": gr.Dropdown(choices=listed_with(names, kept), value=kept)}


def on_leave(services: Services, request: gr.Request) -> None:
    """Closing or reloading the page ends a visitor's session: their job may now be stopped by anyone."""
    services.jobs.release(visitor(request))


def preset_views(train_data, train_preset, train_minutes, shared: bool = False, measure: bool = True,
                 language: str = ENGLISH) -> dict:
    """What the chosen size means (for "fitted", the plan for the time limit from this machine's speed, measured
    once, a few seconds, unless ``measure`` is False; ``shared``: as a visitor's job, on half the cores); the update
    count only where it is the size's to set."""
    minutes = max(0.2, min(training_jobs.MAX_MINUTES, finite(train_minutes, message("train.minutes_name"))))
    size = training_plans.size_summary(train_preset, train_data, minutes, shared, measure)
    shown = Number(minutes, "g")
    if size.parameters is None:
        info = text(language, "train.fitted_plan", minutes=shown, plan=size.plan)
    elif size.plan:
        info = text(language, "train.fitted_plan_size", minutes=shown, plan=size.plan,
                    parameters=Number(size.parameters, ","))
    else:
        info = text(language, "train.preset_size", preset=preset_label(train_preset, language),
                    parameters=Number(size.parameters, ","))
    fitted = train_preset == training_jobs.AUTO_PRESET
    return {"preset_info": info,
            "train_steps": gr.Slider(interactive=not fitted,
                                     info=text(language, "train.steps_by_time" if fitted else "train.steps_most"))}


def on_preset(services: Services, train_data, train_preset, train_minutes, request: gr.Request,
              language: str = ENGLISH) -> dict:
    """The size's meaning; this machine's speed is measured for it, but not while a job trains (it would measure
    the job's leftovers)."""
    return preset_views(train_data, train_preset, train_minutes, shared=visiting_client(request) is not None,
                        measure=not services.jobs.busy(), language=language)


def on_data(services: Services, train_data, train_preset, train_minutes, request: gr.Request,
            language: str = ENGLISH) -> dict:
    """The drop zone only where it is used (a file dropped there stays when the choice changes). Each kind of data
    gets its own default size in place of the other's: text the size fitted to the time limit, the digit tasks the
    tiny model that learns them in a minute; a size chosen by hand stays."""
    synthetic = train_data in SYNTHETIC_TASKS
    defaults = {True: "tiny", False: training_jobs.AUTO_PRESET}
    chosen = defaults[synthetic] if train_preset == defaults[not synthetic] else train_preset
    views = {"train_upload": gr.update(visible=train_data == "upload"), "train_preset": chosen,
             **on_preset(services, train_data, chosen, train_minutes, request, language)}
    if train_data == "multi30k" and not multi30k_available():
        views["preset_info"] = f"**{said(training_plans.MULTI30K_MISSING, language)}**"
    return views


def on_replay(services: Services, replay, language: str = ENGLISH) -> dict:
    job = services.jobs.current
    return {"replay_plot": probe_figure(job.probes if job else [], replay, language)}


def on_open(services: Services, train_data, train_preset, train_minutes, language: str = ENGLISH) -> dict:
    """The page's first view of the tab: the plan only if this machine's speed is known (measuring it waits for
    the tab to open), and the job running now."""
    return {**preset_views(train_data, train_preset, train_minutes, measure=False, language=language),
            **job_views(services, services.jobs.current, language)}


def on_clock(services: Services, seen_job, request: gr.Request, language: str = ENGLISH) -> dict:
    """Another visitor's view of the job, redrawn when it moved on: the replay only when an evaluation came in (so
    an earlier one stays open), the model list once it published. Its starter watches the start stream instead."""
    job = services.jobs.current
    if job is None or (job.status == "running" and job.owner == visitor(request)):
        return {}
    now = {"name": job.name, "status": job.status, "step": job.step, "evaluations": len(job.evals),
           "checkpoint": job.checkpoint}
    if now == seen_job:
        return {}
    seen = seen_job or {}
    new_job_or_phase = (seen.get("name"), seen.get("status")) != (job.name, job.status)
    new_evaluation = new_job_or_phase or seen.get("evaluations") != now["evaluations"]
    published = job.checkpoint is not None and seen.get("checkpoint") != job.checkpoint
    progress = job_progress(job, language)
    if services.jobs.place_of(visitor(request)) is not None:  # their status line is their place in line
        del progress["train_status"]
    return {**progress, **(job_replay(job, language) if new_evaluation else {}),
            **(job_download(services, job) if new_job_or_phase else {}),
            **({"model": gr.Dropdown(choices=services.registry.names())} if published else {}), "seen_job": now}


def declare(page: Page) -> None:
    """Nothing elsewhere changes this tab."""


def wire(page: Page) -> None:
    if not page.services.training:
        return
    c, demo, train_tab = page.components, page.blocks, page.tabs[TAB_ID]
    # A refused start is a message, and leaves the job's outputs as they were (no error badges over them:
    # show_progress="hidden"; the progress bar is the tab's own).
    # The starter's page streams its job; the pages waiting in line for the slot each hold a place here too.
    page.on(c["start_button"].click, on_start, [*JOB_OUTPUTS, "model"], api_name="train", concurrency_id="train",
            concurrency_limit=training_jobs.MAX_WAITING + 1, show_progress="hidden")
    page.on(c["stop_button"].click, on_stop, [], api_name="stop_training")
    page.on(c["delete_button"].click, on_delete, ["trained_download", "delete_button", "keep_button", "model"],
            api_name="delete_trained_model")
    page.on(c["keep_button"].click, on_keep, [*JOB_OUTPUTS, "model"], api_name="keep_stopped_model")

    def leave(request: gr.Request) -> None:  # an unload event has no outputs to name
        on_leave(page.services, request)

    demo.unload(leave)
    page.on([c["replay"].input, c["replay"].release], on_replay, ["replay_plot"], trigger_mode="always_last")
    page.on(c["train_data"].input, on_data, ["train_upload", "train_preset", "preset_info", "train_steps"],
            show_progress="hidden")
    page.on([train_tab.select, c["train_preset"].input, c["train_minutes"].change], on_preset,
            ["preset_info", "train_steps"], show_progress="hidden")
    page.on(demo.load, on_open, ["preset_info", "train_steps", *JOB_OUTPUTS])
    page.on(c["job_clock"].tick, on_clock, [*JOB_OUTPUTS, "model", "seen_job"], show_progress="hidden")
    for tab in page.tabs.values():  # the clock runs only while the Train tab is open
        # An update, not a new gr.Timer: a component made by a handler joins any page being built (later_pages.py).
        tab.select(lambda active=tab is train_tab: gr.update(active=active), None, c["job_clock"],
                   api_visibility="private")
