"""The error the scheduling API raises for an illegal operator definition or schedule step."""

from __future__ import annotations

from ...errors import TilecraftError


class ScheduleError(TilecraftError, ValueError):
    """An operator definition or a schedule primitive is illegal.

    Raised before anything is applied: the schedule is unchanged and every handle stays as it
    was, so the caller may try another step.
    """
