"""Schedules: what to do with each op or fusion group, as transform-dialect scripts.

Plan -> script -> apply, for CPU and CUDA alike (the GPU plans, the ``tilecraft-gpu-schedule``
pass and the GPU knobs live with the CUDA target: targets/cuda/schedule.py, space.py):
- ``op_schedule.py``: the plan data (``OpSchedule``/``GroupSchedule``) and the tile
  arithmetic the planners share;
- ``plan.py``: the default CPU plan of an op (from the loop nest and the target), dispatching
  to ``matmul_plan.py`` (contractions) and ``conv_plan.py`` (convolutions, pooling);
  ``group.py``: a fusion group as one loop nest (its plan and producers);
- ``script.py``: plans rendered as transform-dialect sequences (``ScriptWriter``);
- ``apply.py``: the ``tilecraft-schedule`` pass (tag, plan, render, apply; undo a sequence
  that fails), and ``reproducer`` (a task's payload with its script, for tilecraft-opt);
- ``space.py``: the knobs a tuner searches, whose default point is the default plan;
  ``task.py``: the tuning tasks of a model (ops and groups, keyed by their payload);
  ``records.py``: the records file; ``record_plan.py``: records -> plans at compile time;
- ``te/``: the TE-style API (``tilecraft.scheduling``: compute, Schedule, build), whose
  primitives render through the same script writer.

The search itself (tuners, cost model, measurement, task scheduler) is ``tilecraft.tuning``,
one layer up. Importing this package registers the schedule passes.
"""

from . import apply  # noqa: F401  (registers tilecraft-schedule)
