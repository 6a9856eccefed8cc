"""tuning/in_model.py's join of a profile's kernels with tasks: a kernel name two tasks share
as their anchor (a convolution and the layout transpose of its input, which carries the
convolution's location) is counted once, for the task that has no other kernel."""

from __future__ import annotations

from tilecraft.schedule.task import Task
from tilecraft.tuning.in_model import model_times


def _task(key: str, flops: int, kernels: tuple[tuple[str, ...], ...]) -> Task:
    return Task(key=key, name=key, kind="conv2d", op_name="linalg.conv_2d_nhwc_hwcf", ranges=(1,),
                parallel=(True,), element_type="f32", flops=flops, count=len(kernels), payload="",
                kernels=kernels)


def test_a_shared_anchor_goes_to_the_task_without_other_kernels():
    conv = _task("conv", 1000, (("/0/Conv", "/0/Relu"),))
    transpose = _task("transpose", 1, (("/0/Conv",),))
    profile = {"/0/Conv": 17e-6, "/0/Relu": 36e-6}  # the transpose, the fused conv + relu
    times = model_times([conv, transpose], profile)
    assert times["conv"] == 36e-6
    assert times["transpose"] == 17e-6


def test_an_anchor_of_one_task_is_still_added_to_its_other_kernels():
    conv = _task("conv", 1000, (("/0/Conv", "/0/Pad"),))  # its pad copy became a loop nest of its own
    times = model_times([conv], {"/0/Conv": 30e-6, "/0/Pad": 2e-6})
    assert abs(times["conv"] - 32e-6) < 1e-12
