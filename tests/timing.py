"""Time bounds that hold on a loaded machine (CI: 2 cores, the suite in parallel beside it).

A bound on wall-clock time fails whenever other processes take the CPU. A bound on the CPU time of
this process (user + system, every thread: `time.process_time`) does not, and it still catches the
faults such bounds are for: quadratic loops, giant allocations (their page faults are system
time). A wait that burns no CPU (a hang, a sleep) shows on the wall clock only, so that is bounded
too, `WALL_FACTOR` times looser.
"""
import time

WALL_FACTOR = 10


class Stopwatch:
    "Started when made; `over(s)` says what went past a bound of `s` CPU seconds, or ''."

    def __init__(self):
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()

    @property
    def cpu(self) -> float:
        return time.process_time() - self.cpu0

    @property
    def wall(self) -> float:
        return time.perf_counter() - self.wall0

    def over(self, seconds: float) -> str:
        cpu, wall = self.cpu, self.wall
        if cpu > seconds:
            return f"took {cpu:.2f} s of CPU (bound {seconds} s)"
        if wall > WALL_FACTOR * seconds:
            return f"took {wall:.2f} s of wall-clock time (bound {WALL_FACTOR * seconds} s)"
        return ""
