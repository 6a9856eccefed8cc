"""The gradient task scheduler: where a run's trials go (Ansor's task scheduler).

The :class:`~tilecraft.tuning.roles.TaskScheduler` of ``tilecraft.tune``; see
:class:`GradientTaskScheduler` for the rule.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .options import TuneOptions
from .roles import TaskScheduler
from .session import VALIDATION_ROUNDS, TaskState, search_task

# A task at or above this fraction of its attainable bound (the roofline's: the FMA peak, or
# bandwidth x arithmetic intensity) has little left for a schedule to find.
HEADROOM_FLOOR = 0.85
# The share of the model's time that makes a task heavy for the no-headroom verdict.
HEAVY_SHARE = 0.05


class GradientTaskScheduler(TaskScheduler):
    """Hands trials to tasks, as Ansor's task scheduler does (gradient-based allocation).

    A task's weight is its share of the model's time: the default schedule's time times the
    number of times one call of the model executes the task (``Task.executions``: its
    occurrences, each as often as the loops around it run); its priority is that weight times
    its headroom, the fraction of its time a schedule at its attainable bound would save (the
    roofline's ``min(FMA peak, bandwidth x arithmetic intensity)``, runtime/peak.py; 1 where
    no bound is known), so the budget goes where the gap to the bound times the share of the
    model is largest. Each task first gets ``trials_per_task``, highest priority first;
    then, one batch at a time, the task with the largest expected gain per trial gets the next
    batch: its weighted improvement over its last batch (the backward gradient) averaged with
    an optimistic forward one (its weighted time times its headroom over the trials it has
    had, which favours tasks that are heavy, far from their bound and little searched). Tasks whose search stopped (early stopping,
    space exhausted) drop out; the time budget ends the search between batches.
    """

    def __init__(self, states: list[TaskState], search: TuneOptions, run: Any,
                 deadline: float | None) -> None:
        self.states = states
        self.search = search
        self.run_trial = run
        self.deadline = deadline
        self.planned_minimum = {id(s): 0 for s in states}
        self.weighted_history: dict[int, list[float]] = {id(s): [] for s in states}

    def weight(self, state: TaskState) -> float:
        """The task's share of the model's time (default time x executions per call)."""
        return state.default_cost * state.task.executions

    def priority(self, state: TaskState) -> float:
        """Where trials pay: the share of the model's time a schedule could still save."""
        return self.weight(state) * state.headroom()

    def no_headroom(self) -> str | None:
        """A line saying the model has little left for tuning, when every task of at least
        :data:`HEAVY_SHARE` of its time runs above :data:`HEADROOM_FLOOR` of its attainable
        bound (the FMA peak, or its bandwidth bound); ``None`` otherwise, or when a heavy
        task's bound is unknown."""
        total = sum(self.weight(s) for s in self.states if math.isfinite(self.weight(s))) or 1.0
        heavy = [s for s in self.states if self.weight(s) / total >= HEAVY_SHARE]
        if not heavy or any(s.bound_gflops is None or s.headroom() > 1.0 - HEADROOM_FLOOR for s in heavy):
            return None
        low = min(1.0 - s.headroom() for s in heavy)
        return (f"no headroom: all {len(heavy)} heavy task(s) already run at {low:.0%} or more of "
                f"their roofline bound (FMA peak or bandwidth x arithmetic intensity): "
                f"tuning can gain little here")

    def plan(self, budget: int) -> str:
        """The plan printed before the search: tasks, weights, each one's minimum."""
        total = sum(self.weight(s) for s in self.states) or 1.0
        minimum = self.search.trials_per_task
        lines = [] if self.no_headroom() is None else [str(self.no_headroom())]
        lines += [f"tuning plan: {len(self.states)} task(s), {budget} trial(s) after the defaults, "
                 f"at least {minimum} per task, then by expected gain"
                 + (f", {self.search.time_budget:g} s at most" if self.search.time_budget else "")]
        if minimum * len(self.states) > budget:
            lines.append(f"  the budget covers the minimum of the {budget // max(minimum, 1)} "
                         "heaviest task(s) only")
        for state, trials in self.planned(budget):
            peak = ("" if state.bound_gflops is None else
                    f"  {state.gflops(state.default_cost):6.1f} GFLOPS "
                    f"{1.0 - state.headroom():4.0%} of its bound ({state.bound_gflops:.0f}, "
                    f"{state.bound_name})")
            lines.append(f"  {state.task.name[:48]:<48} weight {self.weight(state) / total:6.1%}"
                         f"{peak}  trials ~{trials}")
        if self.search.validate_top > 0:
            lines.append(f"  then validation: up to {self.search.validate_top + 1} configs x "
                         f"{VALIDATION_ROUNDS} rounds per task, not counted in trials"
                         + (" nor in the time budget" if self.search.time_budget else ""))
        return "\n".join(lines)

    def planned(self, budget: int) -> list[tuple[TaskState, int]]:
        """The plan's trials per task, heaviest first: the minimum (while the budget lasts),
        then the rest of the budget in proportion to priority (weight x headroom), as the
        scheduler would hand it out if every task improved alike. An estimate: the scheduler
        then moves batches to the tasks that improve most, and stopped tasks give theirs back."""
        order = sorted(self.states, key=self.priority, reverse=True)
        total = sum(self.priority(s) for s in order) or 1.0
        minimum, left, shares = self.search.trials_per_task, budget, []
        for state in order:
            share = min(minimum, max(left, 0))
            shares.append(share)
            left -= share
        rest = max(left, 0)
        exact = [rest * self.priority(state) / total for state in order]
        extra = [int(x) for x in exact]
        # Largest remainders first, so the estimates add up to the budget.
        for i in sorted(range(len(order)), key=lambda i: extra[i] - exact[i])[:rest - sum(extra)]:
            extra[i] += 1
        return [(state, share + more) for state, share, more in zip(order, shares, extra)]

    def allocation(self) -> str:
        """Which tasks got how many trials (printed at the end)."""
        lines = ["trials per task:"]
        for state in sorted(self.states, key=lambda s: -s.trials):
            state_note = " (stopped early)" if state.stopped and state.tuner.has_next() else ""
            lines.append(f"  {state.task.name[:48]:<48} {state.trials:>5}{state_note}")
        return "\n".join(lines)

    def _expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _give(self, state: TaskState, trials: int) -> int:
        index = self.states.index(state) + 1
        done = search_task(state, trials, self.run_trial, index, len(self.states),
                       self.search.batch_size, self.search.early_stopping, self.search.tuner,
                       self.search.progress, self.deadline)
        self.weighted_history[id(state)].append(state.best_cost * state.task.executions)
        return done

    def gradient(self, state: TaskState) -> float:
        """Expected reduction of the model's time per trial given to ``state``."""
        history = self.weighted_history[id(state)]
        now = state.best_cost * state.task.executions
        if not math.isfinite(now):
            return 0.0
        before = history[-2] if len(history) >= 2 else self.weight(state)
        backward = max(before - now, 0.0) / max(self.search.batch_size, 1)
        forward = now * state.headroom() / max(state.trials, 1)
        return 0.5 * backward + 0.5 * forward

    def run(self, budget: int) -> None:
        for state in sorted(self.states, key=self.priority, reverse=True):
            share = min(self.search.trials_per_task, budget)
            if share <= 0 or self._expired():
                break
            budget -= self._give(state, share)
        while budget > 0 and not self._expired():
            live = [s for s in self.states if not s.stopped]
            if not live:
                break
            state = max(live, key=self.gradient)
            given = self._give(state, min(self.search.batch_size, budget))
            if given == 0:  # nothing measured: asking again would loop forever
                state.stopped = True
            budget -= given
