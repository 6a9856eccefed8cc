"""Schedule search (transform-dialect scripts, XGBoost cost model, tuning records).

Empty until the tuner issue lands; the default, untuned schedule is in
``tilecraft.pipelines.schedule``.
"""
