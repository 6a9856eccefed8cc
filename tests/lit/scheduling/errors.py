# Illegal steps raise ScheduleError before anything runs; the messages say why.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc

A = tc.placeholder((64, 60), name="A")
B = tc.placeholder((60, 64), name="B")
k = tc.reduce_axis(60, "k")
sch = tc.Schedule(tc.compute((64, 64), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C"))
C = sch.get_block("C")
i, j, k = sch.get_loops(C)


def attempt(step):
    try:
        step()
    except tc.ScheduleError as error:
        print("ScheduleError:", error)


# CHECK: ScheduleError: vectorize: loop 'k' carries a dependence: it iterates the reduction dim 'k' of block 'C'
attempt(lambda: sch.vectorize(k))
# CHECK: ScheduleError: parallel: loop 'k' iterates the reduction dim 'k' of block 'C'
attempt(lambda: sch.parallel(k))
# CHECK: ScheduleError: split: the factors [None, 8] do not divide the extent 60 of loop 'k'; choose a divisor, or pass pad=True
attempt(lambda: sch.split(k, factor=8))
io, ii = sch.split(i, factor=16)
# CHECK: ScheduleError: split: loop 'i' no longer exists: it was consumed by sch.split(l1, factor=16) (it became i_0, i_1)
attempt(lambda: sch.split(i, factor=4))
# CHECK: ScheduleError: reorder: loop 'i_0' steps over 'i' by 16, so it must stay outside 'i_1'
attempt(lambda: sch.reorder(ii, io))
# CHECK: ScheduleError: vectorize: loop 'j' is not the innermost loop of 'C' (inside it: k)
attempt(lambda: sch.vectorize(j))
# CHECK: trace unchanged: True
print("trace unchanged:", sch.history[-1] == "l4, l5 = sch.split(l1, factor=16)")
