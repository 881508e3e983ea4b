"""Threads fitted to the room a limit on the user's processes and threads leaves (``ulimit -u``,
RLIMIT_NPROC: the kernel counts every thread of every process of the user and refuses a new one
past the limit). The numeric libraries start their threads as they load or at their first
parallel loop and cannot fail softly -- OpenMP (libgomp: torch's threads) ends the process from
C (``libgomp: Thread creation failed``, exit code 1), OpenBLAS raises SIGINT on it -- so the room
is read once, at a command's start, before any library that starts threads is imported
(:func:`fit`, from :mod:`cli.commands`), and every count is set from it:

- no limit (none set; root, or a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, which the
  kernel exempts), or room for what the command starts at its libraries' own thread counts:
  nothing changes;
- else: OpenBLAS one thread, torch (OpenMP, MKL) as many as fit beside the command's own
  processes and threads (:func:`_own`), the drawing process only where a thread more fits,
  images decoded in the calling thread (:func:`pool_threads`); one note where torch's threads or
  the drawing change;
- a command that cannot run without processes or threads of its own (``fedrun``'s short-lived
  programs such as git, a sweep's watch thread, ``fedrun-reproduce``'s runs) and finds no room
  for them: one line, exit code 2 (:class:`NoRoom`);
- ``fedrun-reproduce``, which launches runs, runs one thread per library under any limit,
  and starts its runs with the environment as it was (:func:`unfitted_env`): each fits itself.

A process fedrun starts gets one thread per library (:data:`ONE_THREAD`: the drawing
process), or the counts of the fit through the environment (a joblib sweep's workers,
:func:`fit_workers`). Processes of the same user started after the reading (another
program's) can still take the room: the reading is a snapshot of the user's tasks in /proc.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import MutableMapping
from dataclasses import dataclass

from .errors import UserError

TORCH = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch (OpenMP; MKL shares them)
OPENBLAS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")  # numpy's, in its order
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",  # pyarrow's jemalloc: a thread a CPU
}
# fedrun's arguments that start nothing: its help and Hydra's pages, a dry run
PAGES = {"-h", "--help", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc"}
NO_TRAINING = re.compile(r"^\+{0,2}dry_run=(?!false$)", re.IGNORECASE)
EXEMPT_CAPS = (21, 24)  # CAP_SYS_ADMIN, CAP_SYS_RESOURCE: the kernel does not apply the limit
POOL_MAX = 32  # threads decoding images at most (data.images)

# A joblib sweep's tasks (docs/robustness.md, "Threads"): per worker its process and one more
# (the program it starts, git; a worker joblib starts in place of one ending); beside them
# the launching process's watch, executor and queue threads and joblib's two resource
# trackers. Measured at most n_jobs + 6 above the start, every library at one thread.
PER_WORKER = 2
LOKY_TASKS = 5


class NoRoom(UserError):
    """The limit on the user's processes and threads leaves no room for what a command must
    start."""


@dataclass(frozen=True)
class Room:
    """The soft limit on the user's processes and threads, and how many run now."""

    limit: int
    running: int

    @property
    def free(self) -> int:
        """Processes and threads the user may still start."""
        return self.limit - self.running

    def said(self) -> str:
        return f"ulimit -u: {self.limit:,}; {self.running:,} running"


RESERVED: list[int] = []  # the processes and threads this command must start (:func:`_own`)
UNFITTED: dict[str, str | None] = {}  # the variables a fit set, as they were (None: unset)
FITTED: list[bool] = []  # a fit of this process, where a limit made one: a drawing process fits


def tasks_of(uid: int) -> int:
    """The processes and threads of user ``uid`` (what RLIMIT_NPROC counts), from /proc: the
    status of each process whose /proc folder the user owns (its effective user; the real one,
    which the limit counts, read from the status)."""
    count = 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            if not pid.isdigit() or os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def _exempt() -> bool:
    """Whether the kernel exempts this process from the limit: root, CAP_SYS_RESOURCE or
    CAP_SYS_ADMIN."""
    if os.getuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            caps = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
        return any(int(caps, 16) >> cap & 1 for cap in EXEMPT_CAPS)
    except (OSError, ValueError):
        return False


def read() -> Room | None:
    """The room under the limit on this user's processes and threads, or None where no limit
    applies to this process."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft == resource.RLIM_INFINITY or _exempt():
        return None
    return Room(soft, tasks_of(os.getuid()))


def _cpus() -> int:
    """The CPUs this process may run on: the libraries' thread count where none is set."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1


def _count(names: tuple[str, ...], env: MutableMapping[str, str], cpus: int) -> int:
    """The thread count a library reads from the first of ``names`` set to a positive number
    in ``env``; ``cpus`` where none is."""
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return cpus


def _own(prog: str, argv: list[str]) -> tuple[int, int]:
    """The processes and threads ``prog`` starts besides its libraries' threads: those it needs
    (a short-lived program: git, or a run of ``fedrun-reproduce``, which fits its own; the
    watch thread of a sweep), and the drawing process (``fedrun``)."""
    if prog == "fedrun" and any(a in PAGES or NO_TRAINING.match(a) for a in argv):
        return 0, 0  # a page, a config or a dry run: nothing started
    if prog == "fedrun":
        return 1 + bool({"-m", "--multirun"}.intersection(argv)), 1
    return int(prog == "fedrun-reproduce"), 0


def fit(prog: str, argv: list[str], env: MutableMapping[str, str] = os.environ) -> str | None:
    """At ``prog``'s start, before numpy or torch is imported: where the limit leaves less room
    than the command needs at its libraries' own thread counts, the counts fitted to the room in
    ``env`` (noted in :data:`FITTED`); the note to print, or None. Raises :class:`NoRoom` where
    not even the command's own processes and threads fit."""
    room = read()
    if room is None:
        return None
    if prog == "fedrun-reproduce":  # it launches runs, each fitted at its own start: all
        UNFITTED.update({k: env.get(k) for k in ONE_THREAD})  # the room is theirs
        env.update(ONE_THREAD)
    cpus = _cpus()
    torch, blas = _count(TORCH, env, cpus), _count(OPENBLAS, env, cpus)
    needed, drawer = _own(prog, argv)
    RESERVED[:] = [needed]
    pool = min(POOL_MAX, cpus) if prog == "fedrun" else 0
    if room.free >= needed + drawer + (torch - 1) + (blas - 1) + cpus + pool:
        return None
    if room.free < needed:
        raise NoRoom(
            f"the limit on this user's processes and threads leaves no room for what "
            f"{prog} must start ({room.said()}; it needs {needed} more): raise the limit "
            f"(ulimit -u) or end some of this user's processes"
        )
    left = room.free - needed
    threads = min(torch, 1 + left)
    drawing = drawer if left - (threads - 1) >= 1 else 0
    UNFITTED.update({k: env.get(k) for k in ONE_THREAD if k not in UNFITTED})
    env.update({k: ONE_THREAD[k] for k in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF")})
    if threads < torch:
        for name in TORCH:
            env[name] = str(threads)
    FITTED.append(bool(drawing))
    changed = [f"torch runs {threads} thread{'s' if threads > 1 else ''}"] * (threads < torch)
    if drawing < drawer:
        changed.append("the figures are drawn in this process")
    if not changed:
        return None
    return (
        f"the limit on this user's processes and threads leaves room for {room.free} more "
        f"({room.said()}): {', '.join(changed)} (raise ulimit -u for more)"
    )


def unfitted_env() -> dict[str, str]:
    """This process's environment with the variables a fit set as they were: for a run
    ``fedrun-reproduce`` starts, which fits its own counts to the room it finds."""
    env = dict(os.environ)
    for name, value in UNFITTED.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def short_of(more: int) -> Room | None:
    """The room, where a limit applies and it holds fewer than ``more`` threads more than run
    now beside what the command must start (:data:`RESERVED`); None where they fit."""
    room = read()
    return room if room is not None and room.free < more + sum(RESERVED) else None


def drawing_process() -> bool:
    """Whether this process starts a drawing process: unless a fit left no room for one."""
    return all(FITTED)


def pool_threads(wanted: int) -> int:
    """The threads a pool of this process may run (``wanted`` at most): one -- the calling
    thread -- under a fit; where a limit applies otherwise (a joblib worker), as many as the
    room holds beside one short-lived program."""
    room = None if FITTED else read()
    return 1 if FITTED else wanted if room is None else max(1, min(wanted, room.free - 1))


def fit_workers(n_jobs: object, env: MutableMapping[str, str] = os.environ) -> None:
    """Before a joblib sweep starts its workers (``n_jobs``, joblib's: -1 one per CPU, -2 all
    but one, ...): under a limit, each worker's libraries get one thread (in ``env``, which
    they inherit) where the room does not hold them at joblib's own counts. Raises
    :class:`NoRoom` where the workers and joblib's own processes and threads do not fit."""
    jobs = n_jobs if isinstance(n_jobs, int) and n_jobs != 0 else 1
    workers = jobs if jobs > 0 else max(1, _cpus() + 1 + jobs)
    room = read() if workers > 1 else None  # one: joblib runs the jobs in this process
    if room is None:
        return
    each = max(_cpus() // workers, 1)  # joblib's threads per worker, where env sets none
    torch, blas = _count(TORCH, env, each), _count(OPENBLAS, env, each)
    least = workers * PER_WORKER + LOKY_TASKS
    if room.free >= least + workers * ((torch - 1) + (blas - 1) + _cpus()):
        return
    if room.free < least:
        raise NoRoom(
            f"the limit on this user's processes and threads leaves no room for a joblib sweep "
            f"of {workers} worker{'s' if workers > 1 else ''} ({room.said()}; it needs "
            f"{least} more): lower hydra.launcher.n_jobs or raise the limit (ulimit -u)"
        )
    env.update(ONE_THREAD)
