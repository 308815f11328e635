"""The Train tab: a student starts a job, watches it stream, stops it, and translates with the result."""

import gzip
import importlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from ui.training import jobs, training_plans, uploads
from ui.build import build_app, close_app
from transformer.data import DataError
from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError

from helpers import QuickTrainer, calls_ended, serve_on_loopback
from ui import services
from ui.views import model as model_views
from ui.views import training as training_views

REPO = Path(__file__).resolve().parents[2]



@pytest.fixture
def served(tmp_path):
    manager = jobs.JobManager(tmp_path / "runs", trainer=QuickTrainer)
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS, manager.published_dir], device="cpu")
    demo = build_app(services.Services(registry, manager), "reverse-tiny")
    serve_on_loopback(demo)
    yield Client(demo.local_url, verbose=False), manager
    manager.stop()
    manager.wait(60)
    close_app(demo)


def test_a_job_streams_progress_and_its_checkpoint_translates(served):
    client, manager = served
    job = client.submit("reverse", None, "tiny", 40, 3, api_name="/train")
    updates = list(job)
    assert len(updates) >= 3, "progress is streamed while the job runs"
    calls_ended(client, job)
    status, progress, curves, replay, probe, download, model_list = job.outputs()[-1]
    assert "finished" in status and "Finished after 40 updates" in status
    assert 'value="100"' in progress
    assert download["visible"] is True
    traces = {trace["name"]: trace for trace in json.loads(curves["plot"])["data"]}
    assert traces["train loss (smoothed labels)"]["x"][-1] == 40, "the loss curve reaches the last update"
    assert len(traces["validation loss"]["x"]) == 4, "one validation point per evaluation"
    published = manager.current.checkpoint
    assert [published, published] in model_list["choices"], "the finished job's model joins the model list"
    assert [published, published] in client.predict(api_name="/models")["choices"]
    translation = client.predict(published, "1 2 3 4", "greedy", 2, 20, api_name="/translate")[0]
    assert translation == "4 3 2 1", "the published model answers /translate by its name"
    assert not (REPOSITORY_CHECKPOINTS / published).exists(), "bundled checkpoints are never written"


def test_a_stopped_jobs_model_stays_out_of_the_list_until_its_trainer_keeps_it(served):
    client, manager = served
    job = client.submit("copy", None, "tiny", 3000, 10, api_name="/train")
    deadline = time.time() + 60
    while (manager.current is None or manager.current.step < 3) and time.time() < deadline:
        time.sleep(0.2)
    client.predict(api_name="/stop_training")
    manager.wait(120)
    calls_ended(client, job)  # its stream of progress ends once the job has stopped
    stopped = manager.current
    assert stopped.status == "stopped" and stopped.step < 3000
    assert stopped.checkpoint is None and "not in the model list" in stopped.message
    assert stopped.held not in [name for name, _ in client.predict(api_name="/models")["choices"]]
    with pytest.raises(AppError, match="trained by another visitor"):
        Client(client.src, verbose=False).predict(api_name="/keep_stopped_model")
    client.predict(api_name="/keep_stopped_model")
    assert manager.current.checkpoint == stopped.held and "Kept" in manager.current.message
    assert (manager.published_dir / stopped.held / "config.json").is_file()
    assert [stopped.held, stopped.held] in client.predict(api_name="/models")["choices"]


def test_a_new_job_discards_the_model_of_a_stopped_one_nobody_kept(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    manager.start(jobs.JobRequest(data="sort", steps=3000, minutes=5))
    manager.stop()
    manager.wait(120)
    held = manager.current.held
    assert (manager.held_dir / held).is_dir() and not manager.shelf.published()
    manager.start(jobs.JobRequest(data="sort", steps=20, minutes=5))
    manager.wait(120)
    assert not (manager.held_dir / held).exists()
    assert [path.name for path in manager.shelf.published()] == [manager.current.checkpoint]


def test_multi30k_is_always_offered_and_says_how_to_provide_it_when_absent(tmp_path, monkeypatch):
    from ui.tabs import train as train_tab

    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    monkeypatch.setattr("transformer.data.default_cache_dir", lambda: tmp_path / "no-cache")
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    for size in ("auto", "small"):
        shown = train_tab.on_data(tab_services(manager), "multi30k", size, 3, None)
        assert "MULTI30K_DIR" in shown["preset_info"] and "--data-dir" in shown["preset_info"]
    with pytest.raises(jobs.JobError, match="Multi30K is not on this server.*MULTI30K_DIR"):
        manager.start(jobs.JobRequest(data="multi30k", preset="auto", minutes=1), client="10.0.0.1")
    assert manager.current is None and "10.0.0.1" not in manager._starts, "a start that cannot run costs nothing"


def test_one_job_runs_at_a_time_and_the_next_visitor_waits_in_line_then_trains(served):
    client, manager = served
    manager.start(jobs.JobRequest(data="sort", steps=3000, minutes=5))
    job = client.submit("reverse", None, "tiny", 40, 1, api_name="/train")
    deadline = time.time() + 60
    while not job.outputs() and time.time() < deadline:
        time.sleep(0.1)
    assert "you are number 1 in line" in job.outputs()[0][0], "told its place while the first job runs"
    assert manager.current.request.data == "sort"
    manager.stop()
    final = job.result(timeout=120)
    assert manager.current.request.data == "reverse" and manager.current.status == "finished"
    assert "The model is now in the model list" in final[0]


def test_only_the_visitor_who_started_a_job_can_stop_it(served):
    client, manager = served
    other_visitor = Client(client.src, verbose=False)
    job = client.submit("copy", None, "tiny", 3000, 10, api_name="/train")
    deadline = time.time() + 60
    while (manager.current is None or manager.current.step < 1) and time.time() < deadline:
        time.sleep(0.2)
    with pytest.raises(AppError, match="started by another visitor"):
        other_visitor.predict(api_name="/stop_training")
    assert manager.current.status == "running"
    client.predict(api_name="/stop_training")
    manager.wait(120)
    assert manager.current.status == "stopped"
    job.cancel()


def test_a_job_whose_starter_left_can_be_stopped_by_anyone(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    assert manager.stop(owner="anyone") == "No training job is running."
    manager.start(jobs.JobRequest(data="sort", steps=3000, minutes=5), owner="teacher")
    with pytest.raises(jobs.JobError, match="started by another visitor"):
        manager.stop(owner="student")
    manager.release("student")  # someone else leaving changes nothing
    with pytest.raises(jobs.JobError, match="started by another visitor"):
        manager.stop(owner="student")
    manager.release("teacher")
    assert "Stopping" in manager.stop(owner="student")
    manager.wait(120)
    assert manager.current.status == "stopped"


def test_a_bad_upload_is_reported_and_translation_keeps_working(served, tmp_path):
    client, manager = served
    bad = tmp_path / "pairs.tsv"
    bad.write_bytes(b"\x00\x01binary junk" * 100)
    with pytest.raises(AppError, match="binary"):
        client.predict("upload", handle_file(str(bad)), "tiny", 40, 1, api_name="/train")
    no_pairs = tmp_path / "words.tsv"
    no_pairs.write_text("just words\nno tabs here\n", encoding="utf-8")
    with pytest.raises(AppError, match="no tab-separated pairs"):
        client.predict("upload", handle_file(str(no_pairs)), "tiny", 40, 1, api_name="/train")
    assert client.predict("reverse-tiny", "1 2 3", "greedy", 2, 20, api_name="/translate")[0] == "3 2 1"


def test_uploads_over_the_size_limit_are_refused(tmp_path):
    big = tmp_path / "big.tsv"
    big.write_text("a\tb\n" * 20, encoding="utf-8")
    with pytest.raises(DataError, match="limit"):
        uploads.read_upload(big, limit=10)


def test_training_can_be_turned_off_for_public_hosting(monkeypatch, tmp_path):
    monkeypatch.setenv(jobs.DISABLE_VARIABLE, "1")
    with pytest.raises(jobs.JobError, match="turned off"):
        jobs.JobManager(tmp_path).start(jobs.JobRequest())
    manager = jobs.JobManager(tmp_path)
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"), manager),
                     "reverse-tiny")
    endpoints = demo.get_api_info()["named_endpoints"]
    assert "/train" not in endpoints
    assert "/translate" in endpoints


def test_job_views_describe_progress():
    assert "No training job" in training_views.job_status_markdown(None)
    assert training_views.job_curves(None) is None, "no axes around nothing before a job has run"
    assert model_views.probe_figure([], 1) is None
    probe = {"step": 10, "source_tokens": ["▁1", "▁2", "</s>"], "target_tokens": ["▁2", "▁1", "</s>"],
             "translation": "2 1", "cross": [[[[0.1, 0.8, 0.1], [0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]]]}
    fig = model_views.probe_figure([probe, probe], 5)
    assert "evaluation 2 of 2" in fig.layout.title.text
    assert fig.data[0].text[0][0].startswith("step 1: ▁2 → position 0: ▁1")


@pytest.fixture(scope="module")
def time_limited_jobs(tmp_path_factory) -> dict[str, jobs.JobManager]:
    """Three jobs of the shortest time limit, 0.2 minutes, started at once in managers of their own (a time limit is
    on the wall clock, so they end together; each trains at a third of the speed, which no test below counts on):
    one with more updates than fit, one fitted to its time, and one on uploaded text, fitted to this machine."""
    pairs = tmp_path_factory.mktemp("text") / "pairs.tsv"
    pairs.write_text("".join(f"the {a} sees {b} birds\tle {a} voit {b} oiseaux\n" for a in ("cat", "dog", "cow")
                             for b in range(2, 30)))
    requests = {"updates": jobs.JobRequest(data="copy", steps=3000, minutes=0.2),
                "fitted": jobs.JobRequest(data="copy", preset="auto", steps=5, minutes=0.2),
                "text": jobs.JobRequest(data="upload", upload=str(pairs), preset="auto", minutes=0.2)}
    managers = {name: jobs.JobManager(tmp_path_factory.mktemp(name)) for name in requests}
    for name, request in requests.items():
        managers[name].start(request)
    assert managers["fitted"].current.total_steps is None, "a fitted job's update count is not known at its start"
    for manager in managers.values():
        manager.wait(120)
    return managers


@pytest.mark.slow
def test_a_job_ended_by_its_time_limit_says_so_and_counts_as_done(time_limited_jobs):
    job = time_limited_jobs["updates"].current
    assert job.status == "finished" and job.step < 3000
    assert f"Finished at its 0.2-minute time limit, after {job.step} of 3000 updates" in job.message
    assert job.progress() == 1.0
    assert len(job.evals) >= 3, "evaluated along the way by the clock, not only at the end"


@pytest.mark.slow
def test_a_job_fitted_to_its_time_limit_is_planned_for_it_and_ended_by_it(time_limited_jobs):
    manager = time_limited_jobs["fitted"]
    job = manager.current
    assert job.status == "finished"
    assert f"Finished at its 0.2-minute time limit, after {job.step} updates:" in job.message
    assert f"update {job.step} ·" in training_views.job_status_markdown(job)
    training = json.loads((manager.published_dir / job.checkpoint / "config.json").read_text())["training"]
    assert training["plan"] == "auto" and training["max_minutes"] == 0.2
    assert training["steps"] >= 100_000, "the update count is the plan's (the clock ends it), not the request's"


@pytest.mark.slow
def test_a_job_on_text_shows_the_plan_it_made_from_this_machines_speed(time_limited_jobs):
    job = time_limited_jobs["text"].current
    assert job.status == "finished", job.message
    shown = training_views.job_status_markdown(job)
    assert "Planned for this machine: d_model " in shown and "expects about" in shown
    assert "target tokens/s measured" in shown


MULTI30K = pytest.mark.skipif(not os.environ.get("MULTI30K_DIR"), reason="MULTI30K_DIR is not set: Multi30K is not "
                                                                          "available")


def tab_services(manager: jobs.JobManager) -> services.Services:
    return services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"), manager)


@MULTI30K
def test_choosing_text_data_fits_the_size_to_the_time_limit_and_digits_keep_the_tiny_model(monkeypatch, tmp_path):
    from ui.tabs import train as train_tab

    monkeypatch.setattr(training_plans, "PREVIEW_SPEEDS", training_plans.PreviewSpeeds())
    shared = tab_services(jobs.JobManager(tmp_path, trainer=QuickTrainer))
    fitted = train_tab.on_data(shared, "multi30k", "tiny", 5, None)
    assert fitted["train_preset"] == "auto" and fitted["train_steps"].interactive is False
    assert fitted["preset_info"].startswith("**Fitted to 5 minutes**: d_model ")
    assert "parameters" in fitted["preset_info"] and "expects about" in fitted["preset_info"]
    assert "target tokens/s measured" in fitted["preset_info"], "planned from this machine's measured speed"
    short, long = (training_plans.size_summary("auto", "multi30k", minutes) for minutes in (0.5, 15))
    # More time never means a smaller model; on a machine measured slow enough both are the smallest size.
    assert short.parameters <= long.parameters and short.plan != long.plan, "the plan follows the time limit"
    digits = train_tab.on_data(shared, "reverse", "auto", 5, None)
    assert digits["train_preset"] == "tiny" and digits["train_steps"].interactive is True
    assert train_tab.on_data(shared, "upload", "small", 5, None)["train_preset"] == "small", "chosen by hand, kept"
    upload = train_tab.on_preset(shared, "upload", "auto", 5, None)["preset_info"]
    assert "chosen when the job starts, from the file's size and this machine's speed measured then" in upload
    with pytest.raises(InputError, match="time limit in minutes"):
        train_tab.on_preset(shared, "multi30k", "auto", float("nan"), None)


@pytest.mark.slow
@MULTI30K
def test_the_page_measures_this_machines_speed_when_the_train_tab_opens_and_no_job_trains(monkeypatch, tmp_path):
    from ui.tabs import train as train_tab

    monkeypatch.setattr(training_plans, "PREVIEW_SPEEDS", training_plans.PreviewSpeeds())
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    shared = tab_services(manager)
    loaded = train_tab.on_open(shared, "multi30k", "auto", 5)["preset_info"]
    assert "the size is chosen when the job starts, from Multi30K's size" in loaded
    assert training_plans.PREVIEW_SPEEDS.get(measure=False) is None, "nothing measured while the page loads"
    manager.start(jobs.JobRequest(data="reverse", steps=40, minutes=1))
    assert train_tab.on_preset(shared, "multi30k", "auto", 5, None)["preset_info"] == loaded, "not while a job runs"
    assert training_plans.PREVIEW_SPEEDS.get(measure=False) is None
    manager.wait(60)
    opened = train_tab.on_preset(shared, "multi30k", "auto", 5, None)["preset_info"]
    assert "expects about" in opened and training_plans.PREVIEW_SPEEDS.get(measure=False) is not None
    assert train_tab.on_open(shared, "multi30k", "auto", 5)["preset_info"] == opened, "measured once, then known"


def test_progress_counts_updates_or_time_whichever_ends_the_run_first():
    def job(status, step, elapsed_s, minutes=1.0):  # elapsed on the trainer's clock, which the time limit reads
        return jobs.JobState("j", status, jobs.JobRequest(steps=400, minutes=minutes), time.time() - 600, 400,
                             steps=[{"step": step, "elapsed_s": elapsed_s}])
    assert job("running", 100, 6).progress() == pytest.approx(0.25)
    assert job("running", 100, 30).progress() == pytest.approx(0.5)
    assert job("running", 399, 600).progress() == 1.0
    assert job("stopped", 100, 30).progress() == 0.25, "a stopped run shows where it stopped"
    assert job("failed", 0, 30).progress() == 0.0
    assert job("finished", 300, 60).progress() == 1.0
    preparing = jobs.JobState("j", "running", jobs.JobRequest(minutes=1.0), time.time() - 120, 400)
    assert preparing.progress() == 0.0, "data and tokenizer preparation before the first update do not count"


def test_time_left_is_the_sooner_of_the_remaining_updates_and_the_time_limit_on_the_trainers_clock():
    def left(step, elapsed_s, minutes=1.0):  # the job itself started long before its first update
        return jobs.JobState("j", "running", jobs.JobRequest(steps=400, minutes=minutes), time.time() - 600, 400,
                             steps=[{"step": step, "elapsed_s": elapsed_s}]).seconds_left()
    assert left(100, 5) == pytest.approx(15.0), "300 more updates at 20 per second"
    assert left(100, 40) == pytest.approx(20.0), "the time limit comes first"
    assert left(100, 90) == 0.0


@pytest.mark.parametrize("field, message", [("steps", "number of updates must be a finite number"),
                                            ("minutes", "time limit in minutes must be a finite number")])
def test_a_job_asked_for_nan_updates_or_minutes_is_refused_with_a_message(tmp_path, field, message):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    request = jobs.JobRequest(data="reverse", steps=40, minutes=1)
    setattr(request, field, float("nan"))
    with pytest.raises(InputError, match=message):
        manager.start(request, owner="student")
    assert manager.current is None, "nothing started"


def test_a_client_can_use_a_model_trained_after_it_connected(served):
    client, manager = served
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", manager.published_dir / "reverse-later")
    translation = client.predict("reverse-later", "1 2 3", "greedy", 2, 20, api_name="/translate")[0]
    assert translation == "3 2 1", "no /models call needed first"
    with pytest.raises(AppError, match="no checkpoint named 'nonexistent'"):
        client.predict("nonexistent", "1 2 3", "greedy", 2, 20, api_name="/translate")


def test_a_gzip_bomb_uploaded_as_tsv_is_refused_without_decompressing_it_all(tmp_path):
    bomb = tmp_path / "pairs.tsv"
    bomb.write_bytes(gzip.compress(b"a\tb\n" * 10_000_000))  # 39 KB that decompress to 40 MB
    assert bomb.stat().st_size < 100_000
    with pytest.raises(DataError, match="more than 20 MB of text once decompressed"):
        uploads.read_upload(bomb)
    manager = jobs.JobManager(tmp_path / "runs", trainer=QuickTrainer)
    with pytest.raises(DataError, match="once decompressed"):
        manager.start(jobs.JobRequest(data="upload", upload=str(bomb), steps=40, minutes=1), owner="student")
    assert manager.current is None


def test_an_upload_with_a_line_longer_than_a_sentence_pair_is_refused(tmp_path):
    upload = tmp_path / "pairs.tsv"
    upload.write_text("A dog.\tEin Hund.\n" + "a" * 1_000_000 + "\tb\n")
    with pytest.raises(DataError, match="line 2 of pairs.tsv is 1,000,002 characters long"):
        uploads.read_upload(upload)


def publish(manager, name: str, age_s: float) -> None:
    """A model as a finished job leaves it, ``age_s`` seconds old."""
    directory = manager.published_dir / name
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", directory)
    stamp = time.time() - age_s
    os.utime(directory / "config.json", (stamp, stamp))


def test_only_the_newest_trained_models_are_kept_and_never_a_bundled_one(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    for number in range(12):
        publish(manager, f"job-{number:02d}", age_s=1000 - number)
    removed = manager.shelf.keep_newest(10)
    assert removed == ["job-00", "job-01"]
    assert [d.name for d in manager.shelf.published()] == [f"job-{n:02d}" for n in range(2, 12)]
    assert (REPOSITORY_CHECKPOINTS / "reverse-tiny" / "config.json").is_file()


def test_a_trained_model_can_be_deleted_by_its_trainer_only(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    manager.start(jobs.JobRequest(data="reverse", steps=10, minutes=1), owner="student")
    manager.wait(60)
    name = manager.current.checkpoint
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS, manager.published_dir], device="cpu")
    assert registry.get(name).translate("1 2 3").text == "3 2 1"
    with pytest.raises(jobs.JobError, match="trained by another visitor"):
        manager.shelf.delete(name, owner="classmate")
    assert manager.shelf.delete(name, owner="student") == f"Deleted {name}."
    assert not (manager.published_dir / name).exists() and name not in registry.names()
    with pytest.raises(CheckpointError, match=f"no checkpoint named '{name}'"):
        registry.get(name)  # though it was loaded before
    with pytest.raises(jobs.JobError, match="not a model trained in this app"):
        manager.shelf.delete("reverse-tiny", owner="student")


def test_one_client_may_start_only_a_few_jobs_an_hour(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    for _ in range(jobs.JOBS_PER_CLIENT_HOUR):
        manager.start(jobs.JobRequest(data="reverse", steps=10, minutes=1), owner="s", client="10.0.0.7")
        manager.wait(60)
    with pytest.raises(jobs.JobError, match="started 3 training jobs in the last hour"):
        manager.start(jobs.JobRequest(data="reverse", steps=10, minutes=1), owner="s2", client="10.0.0.7")
    manager.start(jobs.JobRequest(data="reverse", steps=10, minutes=1), owner="t", client="10.0.0.8")
    manager.wait(60)
    assert manager.current.owner == "t"


@pytest.mark.slow
@MULTI30K
def test_the_time_to_bleu_benchmark_runs_the_train_tabs_multi30k_job_and_scores_all_of_val(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    time_to_bleu = importlib.import_module("time_to_bleu")
    result = time_to_bleu.time_to_bleu(0.2, runs_dir=tmp_path)
    assert {"minutes", "updates", "val_bleu", "tokens_per_s", "model_parameters"} <= result.keys()
    assert result["minutes"] == 0.2 and result["updates"] > 0 and result["tokens_per_s"] > 0
    expected = result["expected"]
    assert expected["model"] == result["plan"]["model"], "the job trained the plan it made"
    assert expected["expected_updates"] is not None and "d128" in expected["measured"], "what it expected, and why"
    assert "nrefs:1|case:mixed" in result["signature"]


PUBLIC, OTHER_PUBLIC = "203.0.113.7", "198.51.100.2"
LONG_JOB = dict(data="sort", steps=3000, minutes=5)


def waited(manager: jobs.JobManager, owner: str, client: str | None, deadline_s: float = 60) -> None:
    """``owner`` keeps their place in line, asking as their page does, until the slot is theirs."""
    deadline = time.time() + deadline_s
    while manager.wait_in_line(jobs.JobRequest(**LONG_JOB), owner, client) is not None:
        assert time.time() < deadline, "the slot never came"
        time.sleep(0.1)


def test_while_a_visitor_waits_a_public_visitors_job_ends_at_five_minutes_its_model_kept_as_a_stopped_jobs(
        tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer, shared_minutes=0.05)  # 3 s: 30 quick updates
    manager.start(jobs.JobRequest(**LONG_JOB), owner="first", client=PUBLIC)
    assert manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "second", OTHER_PUBLIC) == 1
    waited(manager, "second", OTHER_PUBLIC)
    manager.wait(60)
    ended = manager.current
    assert ended.status == "stopped" and ended.cut and 30 <= ended.step < 3000
    assert "at 0.05 minutes of training because another visitor was waiting for the training slot" in ended.message
    assert (manager.held_dir / ended.held).is_dir(), "kept for its trainer, as a stopped job's model is"
    assert manager.start(jobs.JobRequest(data="reverse", steps=20, minutes=5), owner="second",
                         client=OTHER_PUBLIC).owner == "second"
    assert manager.job_of("first") == ended, "the first visitor's page still follows their own job"
    assert (manager.held_dir / ended.held).is_dir(), "the next job does not remove it while its trainer is here"
    assert manager.keep("first") == f"{ended.held} is now in the model list."
    assert manager.job_of("first").checkpoint == ended.held and manager.current.owner == "second"
    manager.wait(60)


def test_this_machines_own_job_is_not_ended_for_a_waiting_visitor(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer, shared_minutes=0.01)
    manager.start(jobs.JobRequest(**LONG_JOB), owner="teacher", client=None)
    deadline = time.time() + 60
    while manager.current.step < 20:  # twice the shared limit, with a visitor waiting all along
        assert manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "student", PUBLIC) == 1
        assert time.time() < deadline
        time.sleep(0.1)
    assert manager.current.status == "running" and not manager.current.cut
    manager.stop()
    manager.wait(60)


@pytest.mark.parametrize("runner", [PUBLIC, None], ids=["a-visitors-job", "this-machines-job"])
def test_the_line_keeps_one_place_per_address_and_gives_up_a_place_whose_page_went_away(tmp_path, monkeypatch,
                                                                                      runner):
    monkeypatch.setattr(jobs, "WAITER_GONE_S", 0.5)
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    manager.start(jobs.JobRequest(**LONG_JOB), owner="first", client=runner)
    with pytest.raises(jobs.JobError, match="Your training job .* is running; stop it before you start another"):
        manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "first", PUBLIC)
    assert manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "second", OTHER_PUBLIC) == 1
    with pytest.raises(jobs.JobError, match="Another page at your address is already waiting"):
        manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "second's other tab", OTHER_PUBLIC)
    assert manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "third", None) == 2
    deadline = time.time() + 30
    while manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "third", None) != 1:  # "second" stopped asking
        assert time.time() < deadline
        time.sleep(0.1)
    manager.release("third")
    assert manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "fourth", PUBLIC.replace("7", "8")) == 1
    manager.stop()
    manager.wait(60)


def test_a_waiting_visitor_reads_their_place_and_when_their_job_starts_at_the_latest(tmp_path):
    manager = jobs.JobManager(tmp_path, trainer=QuickTrainer)
    manager.start(jobs.JobRequest(**LONG_JOB), owner="first", client=PUBLIC)
    manager.wait_in_line(jobs.JobRequest(data="reverse", steps=20, minutes=2), "second", OTHER_PUBLIC)
    manager.wait_in_line(jobs.JobRequest(**LONG_JOB), "third", None)
    # The running public job ends at 5 minutes now that others wait; the second visitor asked for 2.
    assert 6.5 * 60 < manager.expected_wait_s(2) <= 7 * 60
    assert training_views.waiting_markdown(2, manager.expected_wait_s(2)) == (
        "**Waiting for the training slot**: you are number 2 in line. Your job starts by itself when the job running "
        "now and the visitor ahead of you have finished, within 7 minutes. Keep this page open: closing it gives up "
        "your place.")
    assert "the job running now and the 2 visitors ahead of you have finished, within a minute" in \
        training_views.waiting_markdown(3, 30)
    manager.stop()
    manager.wait(60)
