"""Pure numeric core: metrics, temperature fits, combiners, pairs, Pareto.

Everything here is a pure function on tensors/arrays: no file I/O, no globals.
"""
