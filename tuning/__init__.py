"""Schedule search: transform-dialect scripts, an XGBoost-guided tuner, persistent records.

    import tilecraft
    result = tilecraft.tune("model.onnx", trials=200, tuning_records="model.jsonl")
    module = tilecraft.compile("model.onnx", tuning_records="model.jsonl")

Roles by name, one interface each in ``roles`` (TVM MetaSchedule's): ``SpaceGenerator``
(``space_generators``: the CPU hand spaces of schedule/space.py, the CUDA space, templates),
``Runner`` (``measure`` local, ``measure_remote``, ``measure_ray``), ``Database``
(``database``: the JSON-lines records), ``CostModel`` (``cost_model``: XGBoost),
``SearchStrategy`` (``tuners``: xgb, xgb_rank, random, grid), ``TaskScheduler``
(``task_scheduler``: gradient). ``tune`` only wires them; ``options`` (``TuneOptions``),
``session`` (one task's search and validation), ``results`` (the summary table) and
``compare_tuners`` are what they say; ``kernel_tasks`` makes the tasks of a bf16 or int8
build's dot-product kernels (``tune(..., precision=...)``). See docs/tuning.md. xgboost, tqdm and matplotlib are
imported only when used.
"""

from __future__ import annotations

from ..schedule.records import Record, best_records, load_records
from ..schedule.space import Knob, ScheduleSpace, space_for
from ..schedule.task import Task, extract_tasks
from .database import JsonLinesDatabase
from .kernel_tasks import extract_kernel_tasks
from .options import TuneOptions
from .results import TaskResult, TuningResult
from .roles import CostModel, Database, Runner, SearchStrategy, SpaceGenerator
from .space_generators import space_generator_for
from .task_scheduler import GradientTaskScheduler
from .tune import model_tasks, tune
from .template_tune import TemplateTuningResult, tune_template
from .templates import (
    ConfigEntity,
    ConfigSpace,
    TemplateTask,
    apply_history_best,
    get_config,
    task,
    template,
)
from .tuners import TUNERS, make_tuner

# The public name of the default task scheduler since before the roles had interfaces
# (the interface is ``tilecraft.tuning.roles.TaskScheduler``).
TaskScheduler = GradientTaskScheduler

__all__ = [
    "CostModel", "Database", "GradientTaskScheduler", "JsonLinesDatabase", "Runner",
    "SearchStrategy", "SpaceGenerator", "space_generator_for",
    "ConfigEntity", "ConfigSpace", "Knob", "Record", "ScheduleSpace", "TUNERS", "Task",
    "TaskResult", "TaskScheduler", "TemplateTask", "TemplateTuningResult", "TuneOptions",
    "TuningResult", "apply_history_best", "best_records", "extract_kernel_tasks", "extract_tasks", "get_config",
    "load_records", "make_tuner", "model_tasks", "space_for", "task", "template", "tune", "tune_template",
]
