"""The check every schedule-error test makes: the step raises a typed ScheduleError naming
the problem and leaves the schedule as it was (script and loops), so a user can go on."""

import pytest

import tilecraft.scheduling as tc
from tilecraft import TilecraftError


def raises(sch, message, step):
    """``step()`` raises ScheduleError matching ``message`` and leaves ``sch`` unchanged."""
    script, loops = sch.script, {b.name: [l.name for l in b.loops] for b in sch.get_blocks()}
    with pytest.raises(tc.ScheduleError, match=message) as info:
        step()
    assert isinstance(info.value, TilecraftError)
    assert sch.script == script
    assert {b.name: [l.name for l in b.loops] for b in sch.get_blocks()} == loops
