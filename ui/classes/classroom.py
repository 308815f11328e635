"""Classes that explore together: a teacher opens a class on a lesson, students join with a short code from their
phones, each answers the lesson's question once, and the teacher reveals the model's answer on every phone.

Held in memory only: no names, no accounts, and nothing kept once a class ends. A student is the session their
page (or script) opened; the teacher is the session that opened the class, and only it may reveal, move on or
close. A server holds a few classes of a few hundred students at most, each public address two of them; a class
ends when no student has joined it 15 minutes after it opened, or 30 minutes after anyone last used it (the pages
of a class in progress ask every few seconds).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from transformer.errors import InputError

from ..runtime import settings
from ..runtime.language import Count, Message, message
from ..views.lessons import LESSONS, Lesson
from ..views.questions import Question

CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # none that read alike (0 and O, 1 and I)
CODE_LENGTH = 5
IDLE_S = 30 * 60
UNJOINED_S = 15 * 60


class ClassError(InputError):
    """Why a class request cannot be done, in one sentence for the person who asked: a message
    (runtime/language.py), in the language of the page that asked."""

    def __init__(self, key: str, **values):
        super().__init__(message(f"class.error.{key}", **values))


@dataclass
class Round:
    """One question put to the class: its lesson, the model's answer, and each student's choice."""

    lesson: int                                   # 1-based
    question: Question
    answers: dict[str, int] = field(default_factory=dict)
    revealed: bool = False

    def counts(self) -> list[int]:
        tally = [0] * len(self.question.choices)
        for choice in self.answers.values():
            tally[choice] += 1
        return tally

    def right(self) -> int:
        return sum(choice == self.question.answer for choice in self.answers.values())


@dataclass
class Classroom:
    code: str
    teacher: str
    rounds: list[Round]
    students: set[str] = field(default_factory=set)
    last_used: float = 0.0
    opened: float = 0.0
    address: str | None = None  # the public address that opened it (None: this machine's own user)

    @property
    def current(self) -> Round:
        return self.rounds[-1]

    def score(self) -> tuple[int, int]:
        """(right answers, answers) over every question revealed so far."""
        shown = [r for r in self.rounds if r.revealed]
        return sum(r.right() for r in shown), sum(len(r.answers) for r in shown)


@dataclass(frozen=True)
class Results:
    """What the teacher sees: the question's number, counts per choice, and whether it was revealed."""

    lesson: int
    question: Question
    counts: list[int]
    students: int
    revealed: bool
    score: tuple[int, int]


class Classrooms:
    """Every open class of a server. ``ask(lesson)`` computes a lesson's question (``questions.predict_question``
    with the server's models)."""

    def __init__(self, ask: Callable[[Lesson], Question], max_classes: int | None = None,
                 max_students: int | None = None, idle_s: float = IDLE_S, unjoined_s: float = UNJOINED_S,
                 per_address: int | None = None, clock: Callable[[], float] = time.monotonic):
        """The limits not given are the server's settings (``EXPLORER_MAX_CLASSES``, ``EXPLORER_MAX_STUDENTS``,
        ``EXPLORER_CLASSES_PER_ADDRESS``)."""
        self.ask, self.clock = ask, clock
        self.max_classes = settings.value("EXPLORER_MAX_CLASSES") if max_classes is None else max_classes
        self.max_students = settings.value("EXPLORER_MAX_STUDENTS") if max_students is None else max_students
        self.per_address = settings.value("EXPLORER_CLASSES_PER_ADDRESS") if per_address is None else per_address
        self.idle_s, self.unjoined_s = idle_s, unjoined_s
        self._lock = threading.Lock()
        self._classes: dict[str, Classroom] = {}

    def _ends_at(self, room: Classroom) -> float:
        """When the class closes unless someone uses it (or, for one nobody joined yet, a student joins)."""
        idle_end = room.last_used + self.idle_s
        return idle_end if room.students else min(idle_end, room.opened + self.unjoined_s)

    def _expire(self) -> None:
        now = self.clock()
        for code in [code for code, room in self._classes.items() if now >= self._ends_at(room)]:
            del self._classes[code]

    def _minutes_until_one_ends(self, rooms: list[Classroom]) -> int:
        return max(1, math.ceil((min(map(self._ends_at, rooms)) - self.clock()) / 60))

    def _room(self, code: str) -> Classroom:
        typed = normal_code(code)
        room = self._classes.get(typed)
        if room is None:
            if len(typed) == CODE_LENGTH and set(typed) <= set(CODE_LETTERS):
                raise ClassError("no_class", code=typed)
            raise ClassError("no_class_typed")
        room.last_used = self.clock()
        return room

    def _teachers(self, code: str, teacher: str) -> Classroom:
        room = self._room(code)
        if room.teacher != teacher:
            raise ClassError("not_teacher")
        return room

    def lessons_open(self) -> set[int]:
        """The lessons (1-based) the open classes are on."""
        with self._lock:
            self._expire()
            return {room.current.lesson for room in self._classes.values()}

    def open(self, lesson: int, teacher: str, address: str | None = None) -> str:
        """A new class on ``lesson`` (1-based) opened by the session ``teacher`` from the public ``address`` (None:
        this machine's own user, who may open any number the server holds); its code."""
        if not 1 <= lesson <= len(LESSONS):
            raise ClassError("lesson_range", last=len(LESSONS))
        with self._lock:
            self._check_room_for(address)
        question = self.ask(LESSONS[lesson - 1])  # computed outside the lock: other classes go on meanwhile
        with self._lock:
            self._check_room_for(address)  # another page may have opened one meanwhile
            code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
            while code in self._classes:
                code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
            now = self.clock()
            self._classes[code] = Classroom(code, teacher, [Round(lesson, question)], last_used=now, opened=now,
                                            address=address)
            return code

    def _check_room_for(self, address: str | None) -> None:
        self._expire()
        own = [room for room in self._classes.values() if address is not None and room.address == address]
        if len(own) >= self.per_address:
            raise ClassError("address_full", count=len(own),
                             wait=Count(self._minutes_until_one_ends(own), "minute"))
        if len(self._classes) >= self.max_classes:
            raise ClassError("server_full", count=self.max_classes,
                             wait=Count(self._minutes_until_one_ends(list(self._classes.values())), "minute"))

    def question(self, code: str, student: str | None = None) -> Round:
        """The class's current round; ``student`` joins the class by asking (the class has room for so many)."""
        with self._lock:
            self._expire()
            room = self._room(code)
            if student is not None and student != room.teacher and student not in room.students:
                if len(room.students) >= self.max_students:
                    raise ClassError("class_full", count=self.max_students)
                room.students.add(student)
            return room.current

    def answer(self, code: str, student: str, choice: int) -> Message:
        """Record ``student``'s one answer to the current question; what happened, in a sentence."""
        round_ = self.question(code, student)
        with self._lock:
            if round_.revealed:
                raise ClassError("revealed")
            if student in round_.answers:
                raise ClassError("answered")
            if not 0 <= choice < len(round_.question.choices):
                raise ClassError("choose_one", count=len(round_.question.choices))
            round_.answers[student] = choice
            return message("class.answer_in")

    def results(self, code: str) -> Results:
        with self._lock:
            self._expire()
            room = self._room(code)
            round_ = room.current
            return Results(round_.lesson, round_.question, round_.counts(), len(room.students), round_.revealed,
                           room.score())

    def reveal(self, code: str, teacher: str) -> Round:
        with self._lock:
            self._expire()
            room = self._teachers(code, teacher)
            room.current.revealed = True
            return room.current

    def next(self, code: str, teacher: str) -> Round:
        """The next lesson's question, once this one was revealed (the last lesson's is the last)."""
        with self._lock:
            self._expire()
            room = self._teachers(code, teacher)
            if not room.current.revealed:
                raise ClassError("reveal_first")
            if room.current.lesson == len(LESSONS):
                raise ClassError("last_lesson")
            lesson = room.current.lesson + 1
        question = self.ask(LESSONS[lesson - 1])
        with self._lock:
            if room.current.lesson == lesson - 1:  # a second press meanwhile has moved on already
                room.rounds.append(Round(lesson, question))
            return room.current

    def close(self, code: str, teacher: str) -> tuple[int, int]:
        """End the class; its score (right answers, answers) over the questions revealed."""
        with self._lock:
            room = self._teachers(code, teacher)
            del self._classes[room.code]
            return room.score()

    def open_count(self) -> int:
        with self._lock:
            self._expire()
            return len(self._classes)


def normal_code(code: str | None) -> str:
    """A code as typed: case and spaces do not matter."""
    return "".join(str(code or "").split()).upper()[:2 * CODE_LENGTH]
