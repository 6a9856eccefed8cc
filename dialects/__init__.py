"""tilecraft's graph dialect (IRDL, loaded at run time) lives here.

Empty until the graph-dialect issue lands; kept so the design card's layout
(``tilecraft.dialects``) is importable from the start.
"""
