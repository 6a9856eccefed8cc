"""Schedule search: transform-dialect scripts, an XGBoost-guided tuner, persistent records.

    import tilecraft
    result = tilecraft.tune("model.onnx", trials=200, tuning_records="model.jsonl")
    module = tilecraft.compile("model.onnx", tuning_records="model.jsonl")

Roles, one module each (TVM's meta_schedule layout): ``task`` (what to tune), ``space`` (the
knobs of each kernel class, rendered by the default schedule's script writer), ``measure``
(build and run in a worker process), ``records`` (JSON lines), ``cost_model`` (XGBoost),
``tuners`` (xgb, xgb_rank, random, grid), ``templates`` (AutoTVM-style schedule templates
and their tasks), ``tune`` (task scheduler, progress), ``apply``
(the best record per op inside ``tilecraft-schedule``), ``report`` (the PNG). See
docs/tuning.md. xgboost, tqdm and matplotlib are imported only when used.
"""

from __future__ import annotations

from ..schedule.records import Record, best_records, load_records
from ..schedule.space import Knob, ScheduleSpace, space_for
from ..schedule.task import Task, extract_tasks
from .tune import TaskResult, TaskScheduler, TuneOptions, TuningResult, tune
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

__all__ = [
    "ConfigEntity", "ConfigSpace", "Knob", "Record", "ScheduleSpace", "TUNERS", "Task",
    "TaskResult", "TaskScheduler", "TemplateTask", "TemplateTuningResult", "TuneOptions",
    "TuningResult", "apply_history_best", "best_records", "extract_tasks", "get_config",
    "load_records", "make_tuner", "space_for", "task", "template", "tune", "tune_template",
]
