"""The process costly computations run in, so that they never hold the server's Python interpreter.

The threads of one Python process take turns at its interpreter: while an attribution over the sample sentences
ran in the server, every translation waited for that computation's Python-level steps, whatever the cores. A
computation sent here runs in a process of its own (``python -m ui.runtime.worker``, started with the server) on
half the cores at the lowest CPU priority, and the server's thread waits for its answer without holding the
interpreter.

A computation is a module-level function and its arguments, sent pickled. A ``Checkpoint`` argument travels as
its directory: the worker loads it there once and keeps the last models it used. A ``Callback`` argument stands
for a callback: the computation calls it in the worker, and the callback runs here with what it reported. A worker
that ends during a computation (out of memory, killed) is started again at once; its caller gets one sentence.
A computation that reports progress can be stopped (``run_stoppable``): it ends at its next report, with its
process.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import IO

import torch

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint, CheckpointError, load_checkpoint, no_checkpoint_named
from transformer.speed_choices import CACHE_FILE, choose_speed

from . import settings
from .model_names import checkpoint_name, set_for

from .language import message
from .memory import release_memory

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]  # the repository: where "ui" is found
KEPT_MODELS = 2  # a lesson's pair; each one kept is a second copy of a model the server holds
TRIM_AFTER_CPU_S = 1.0  # a small computation leaves little memory to hand back
# The lowest CPU priority: a translation or a view that needs a core the worker computes on gets it first.
NICENESS = 19
FRAME = struct.Struct("<Q")  # each message: its length, then its pickle
PARENT_CHECK_S = 1.0  # how often the worker checks that the server still runs


class Stopped(InputError):
    """A computation its visitor stopped (the Stop button)."""

    def __init__(self):
        super().__init__(message("runtime.stopped"))  # said in the page's language (errors.py)


class WorkerDied(RuntimeError):
    """The worker process ended before the computation did."""

    def __init__(self):
        super().__init__(message("runtime.worker_died"))  # said in the page's language (errors.py)


class Callback:
    """A callback as an argument of a computation sent to the worker: the computation calls it there, and
    ``callback`` is called here with the same arguments."""

    def __init__(self, callback: Callable[..., object]):
        self.callback = callback

    def __reduce__(self):
        return reporter, ()


class OnDisk:
    """A checkpoint on its way to the worker: its directory, device and weights' dtype, loaded there when
    unpickled."""

    def __init__(self, checkpoint: Checkpoint):
        if checkpoint.path is None:
            raise ValueError("only a checkpoint saved in a directory can be sent to the worker")
        self.directory, self.device = str(checkpoint.path), checkpoint.model.device.type
        self.pair, self.dtype = checkpoint.pair, checkpoint.model.dtype

    def __reduce__(self):
        return loaded, (self.directory, self.device, self.pair, self.dtype)


class ModelsOnDisk:
    """Checkpoints by name, as a computation in the worker asks for them: ``name`` -> the checkpoint (its weights
    in the dtype ``kept_in`` names, as the server keeps it; float32 otherwise)."""

    def __init__(self, directories: dict[str, Path], device: str, kept_in: dict[str, torch.dtype] | None = None):
        self.directories = {name: str(path) for name, path in directories.items()}
        self.device = torch.device(device).type  # as OnDisk names it: one copy of a model, not "cuda" and "cuda:0"
        self.kept_in = kept_in or {}

    def __call__(self, name: str) -> Checkpoint:
        directory = self.directories.get(checkpoint_name(name))
        if directory is None:
            raise no_checkpoint_named(name, self.directories)
        try:
            return set_for(loaded(directory, self.device, None, self.kept_in.get(checkpoint_name(name))), name)
        except CheckpointError as error:  # name the checkpoint, not the server's directories
            raise error.without(str(Path(directory).parent) + "/") from None


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(FRAME.pack(len(payload)) + payload)
    stream.flush()


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next message, or None once the other side has closed its end."""
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    (length,) = FRAME.unpack(header)
    payload = stream.read(length)
    return payload if len(payload) == length else None


class Worker:
    """The server's side of the worker process: one computation at a time, in the order asked."""

    def __init__(self, threads: int):
        self.threads = threads
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()  # one computation in the pipe at a time
        self.spent = threading.local()  # the worker's CPU-seconds for computations this thread asked for

    def start(self) -> None:
        """Start the worker if it is not running (it loads its modules meanwhile; calls wait for it)."""
        if self.process is None or self.process.poll() is not None:
            environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
            self.process = subprocess.Popen([sys.executable, "-m", "ui.runtime.worker", str(self.threads)], cwd=ROOT,
                                            env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            log.info("costly computations run in process %d on %d thread(s)", self.process.pid, self.threads)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def cpu_s(self) -> float:
        """CPU-seconds the worker spent on the computations this thread asked for, since the thread began."""
        return getattr(self.spent, "cpu_s", 0.0)

    def run(self, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)`` computed in the worker; its result, or the exception it raised there."""
        return self.run_stoppable(None, fn, *args, **kwargs)

    def run_stoppable(self, stopped: Callable[[], bool] | None, fn: Callable, *args, **kwargs):
        """``run``, asking ``stopped()`` at each progress report: once it says so, the computation ends there,
        with the worker's process (started again for the next), and ``Stopped`` is raised."""
        request = pickle.dumps((fn, tuple(map(sendable, args)), {k: sendable(v) for k, v in kwargs.items()}))
        callbacks = [value.callback for value in (*args, *kwargs.values()) if isinstance(value, Callback)]
        with self.lock:
            self.start()
            try:
                answer = self.exchange(request, callbacks, stopped)
            except BaseException:
                self.stop()  # interrupted here while the worker computes: what it sends next would answer no one
                raise
            if answer is None:
                log.error("the worker process ended (exit status %s) during %s; starting another",
                          self.process.wait(), fn.__qualname__)
                self.start()
                raise WorkerDied()
        kind, value, trace, cpu_s = answer
        self.spent.cpu_s = self.cpu_s() + cpu_s
        if kind == "error":
            # For the log, should it be a bug; what add_note does, which Python 3.10 lacks.
            value.__notes__ = [*getattr(value, "__notes__", []), f"Raised in the worker process:\n{trace}"]
            raise value
        return value

    def exchange(self, request: bytes, callbacks: list[Callable],
                 stopped: Callable[[], bool] | None = None) -> tuple | None:
        """Send ``request`` and read until its answer, calling ``callbacks`` with each report on the way (unless
        ``stopped()`` says to stop: ``Stopped``); None when the worker ends first."""
        try:
            write_frame(self.process.stdin, request)
            while (reply := read_frame(self.process.stdout)) is not None:
                kind, *rest = pickle.loads(reply)
                if kind != "progress":
                    return kind, *rest
                if stopped is not None and stopped():
                    raise Stopped()
                for callback in callbacks:
                    callback(*rest[0])
        except (BrokenPipeError, ConnectionError):
            pass
        return None


def sendable(value):
    return OnDisk(value) if isinstance(value, Checkpoint) else value


# --- in the worker process ----------------------------------------------------------------------

# (directory, device, dtype) -> (the directory's signature, the checkpoint), the one used last at the end
_models: OrderedDict[tuple[str, str, torch.dtype | None], tuple[tuple | None, Checkpoint]] = OrderedDict()
_replies: IO[bytes] | None = None  # where a Callback's reports go


def loaded(directory: str, device: str, pair: tuple[str, str] | None = None,
           dtype: torch.dtype | None = None) -> Checkpoint:
    """The checkpoint at ``directory``, its weights in ``dtype``, loaded once while it is among the last
    ``KEPT_MODELS`` used, and again should its directory have been made anew since (a trainer kept a new model under
    a removed one's name); set for a multilingual model's ``pair`` of languages."""
    dtype = None if dtype == torch.float32 else dtype  # what load_checkpoint gives: one copy of the model
    key, made = (directory, device, dtype), signature(directory)
    if key in _models and _models[key][0] == made:
        _models.move_to_end(key)
    else:
        _models.pop(key, None)
        checkpoint = load_checkpoint(Path(directory), device, dtype)
        choose_speed(checkpoint.model, settings.hub_directory() / CACHE_FILE)  # this process's threads
        _models[key] = made, checkpoint
        while len(_models) > KEPT_MODELS:
            _models.popitem(last=False)
    checkpoint = _models[key][1]
    return checkpoint.in_languages(*pair) if pair else checkpoint


def signature(directory: str) -> tuple | None:
    """What changes when a directory is made anew: its inode and its status change time."""
    try:
        status = os.stat(directory)
    except OSError:
        return None
    return status.st_ino, status.st_ctime_ns


def reporter() -> Callable[..., None]:
    """A ``Callback`` as the worker unpickles it: a function that sends what it is called with to the server."""
    return lambda *values: write_frame(_replies, pickle.dumps(("progress", values)))


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Compute what the server sends, one at a time, until it closes the pipe."""
    global _replies
    _replies = replies
    while (request := read_frame(requests)) is not None:
        started = time.process_time()
        try:
            fn, args, kwargs = pickle.loads(request)
            answer = ("result", fn(*args, **kwargs), "")
        except Exception as error:  # noqa: BLE001 - the server decides what the visitor reads
            answer = ("error", error, traceback.format_exc())
        cpu_s = time.process_time() - started
        try:
            reply = pickle.dumps((*answer, cpu_s))
        except Exception as error:  # noqa: BLE001 - an answer that cannot be sent is a bug; say which
            reply = pickle.dumps(("error", RuntimeError(f"an answer that cannot be sent: {error}"),
                                  traceback.format_exc(), cpu_s))
        write_frame(replies, reply)
        if cpu_s > TRIM_AFTER_CPU_S:
            release_memory()


def end_with(server: int) -> None:
    """End this process once the server has: mid-computation it would otherwise compute on for no one (the closed
    pipe tells it only when it next reads)."""
    while os.getppid() == server:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    torch.set_num_threads(int(sys.argv[1]))
    os.nice(NICENESS)
    threading.Thread(target=end_with, args=(os.getppid(),), daemon=True).start()
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not land in the pipe
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    from ui.runtime import worker  # run as ui.runtime.worker, where what the server sends finds its state

    worker.main()
