"""Where the task scheduler's trials go in a run (issue #44 goal 2: "the budget goes where the
gap to the bound times the task's share of the model is largest").

``GradientTaskScheduler.run`` is driven with a stand-in for ``search_task`` that measures
nothing (no batch finds a better config), so the allocation is the scheduler's rule alone:
no worker, no timings. The plan's estimate (``planned``) is tested in
test_tuning_tune.py and test_roofline.py; these tests check what ``run`` hands out.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import mlir_text
from tilecraft.runtime.peak import Roofline
from tilecraft.tuning import GradientTaskScheduler, TuneOptions, extract_tasks, space_for
from tilecraft.tuning import task_scheduler
from tilecraft.tuning.session import TaskState

TARGET = "llvm"
# Round figures: 200 GFLOPS; every byte in the L2 at 400 GB/s, so each matmul below is
# bound by the peak.
ROOF = Roofline(200.0, (("L2", 1 << 30, 400.0), ("memory", float("inf"), 20.0)))


def _state(m: int, fraction_of_peak: float) -> TaskState:
    (task,) = extract_tasks(mlir_text.matmul(m, 128, 256), TARGET)
    state = TaskState(task, space_for(task, TARGET), "random", 0, None, None, ROOF)
    state.default_cost = task.flops / (fraction_of_peak * ROOF.peak_gflops * 1e9)
    return state


def _fake_search(state: TaskState, share: int, run, index, count, batch_size, early_stopping,
                 tuner, progress, deadline=None) -> int:
    """A ``search_task`` that counts ``share`` trials and finds nothing faster."""
    state.trials += share
    return share


def _run(states: list[TaskState], budget: int, monkeypatch) -> list[int]:
    monkeypatch.setattr(task_scheduler, "search_task", _fake_search)
    options = TuneOptions(trials=budget, progress=False, trials_per_task=4, batch_size=4)
    GradientTaskScheduler(states, options, None, None).run(budget)
    return [state.trials for state in states]


def test_the_budget_goes_to_the_task_far_from_its_bound_not_the_heaviest(monkeypatch):
    """A task at 95 % of the peak with more than twice the share of one at 30 % gets fewer trials: the
    priority is share x gap to the bound. With the bound unknown (no roofline: headroom 1 for
    both), the same two tasks are weighed by time alone and the heavy one gets more."""
    near, far = _state(512, 0.95), _state(64, 0.30)
    # The near task is the heavier one: its default time x executions is larger.
    assert near.default_cost * near.task.executions > 2 * far.default_cost * far.task.executions
    given = _run([near, far], 200, monkeypatch)
    assert sum(given) == 200
    assert given[1] > 3 * given[0]

    # No bounds known: time alone decides, and the heavier task gets the larger share.
    for state in (near, far):
        state.bound_gflops, state.trials = None, 0
    given = _run([near, far], 200, monkeypatch)
    assert given[0] > given[1]


def test_a_task_at_its_bound_gets_only_its_minimum(monkeypatch):
    """Headroom 0 (at or above the bound): after ``trials_per_task`` it gets nothing more
    while another task has a gap left."""
    at_bound, below = _state(256, 1.0), _state(64, 0.4)
    given = _run([at_bound, below], 100, monkeypatch)
    assert given == [4, 96]


def test_a_task_whose_last_batch_improved_comes_first(monkeypatch):
    """The backward gradient: of two tasks at the same best time, trials and gap to the bound,
    the one whose last batch found a faster config has the larger expected gain per trial.
    (The forward term, best time x headroom / trials, shrinks as a task improves: a task
    finding 3 % per batch of 4 trials at half the peak draws no more batches than a steady
    one until its trials reach about 60: Ansor's rule, kept.)"""
    improving, steady = _state(128, 0.4), _state(128, 0.5)
    improving.tuner = SimpleNamespace(best_cost=steady.default_cost, has_next=lambda: True)
    scheduler = GradientTaskScheduler([improving, steady], TuneOptions(progress=False), None, None)
    for state in (improving, steady):
        state.trials = 8
        scheduler.weighted_history[id(state)] = [state.default_cost, state.best_cost]
    assert improving.best_cost == steady.best_cost and improving.headroom() == steady.headroom()
    assert scheduler.gradient(improving) > scheduler.gradient(steady)


def test_the_time_budget_ends_the_search_between_batches(monkeypatch):
    states = [_state(128, 0.5), _state(64, 0.5)]
    monkeypatch.setattr(task_scheduler, "search_task", _fake_search)
    scheduler = GradientTaskScheduler(states, TuneOptions(trials=100, progress=False), None, deadline=0.0)
    scheduler.run(100)
    assert all(state.trials == 0 for state in states)


@pytest.mark.parametrize("budget, expected", [(3, [0, 3]), (9, [4, 5])])
def test_the_minimums_go_highest_priority_first(monkeypatch, budget, expected):
    """``trials_per_task`` (4) goes first to the task with the larger gap x share; a budget
    below the minimums leaves the other out, and what is left after them goes by gradient."""
    near, far = _state(512, 0.95), _state(64, 0.30)
    assert _run([near, far], budget, monkeypatch) == expected
