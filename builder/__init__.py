"""Models built in Python, as Relax's BlockBuilder builds them (the MLC course's flow).

    from tilecraft.builder import ModelBuilder
    mb = ModelBuilder()
    x = mb.input("x", (1, 784))
    w = mb.const(weights, name="w")
    h = mb.emit_te(dense_relu, x, w)                      # any TE compute function
    y = mb.call_dps_packed("env.linear", [h, w1, b1], (1, 10))   # a registered extern
    mb.output(y)
    module = mb.build()                                   # tilecraft.compile's CompiledModule

See docs/scheduling.md ("Building a model").
"""

from .model_builder import ModelBuilder, Value

__all__ = ["ModelBuilder", "Value"]
